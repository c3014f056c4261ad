// ChangeFeedPruner over a real SQLite storage, its time from a base::FakeClock.

#include "core/replication/change_feed_pruner.h"

#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "persistence/sqlite/sqlite_storage.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/support/wait_until.h"

namespace debugplane::core {
namespace {

using ::debugplane::testing::ScopedTempDir;

class ChangeFeedPrunerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto storage = persistence::SqliteStorage::Open((dir_.path() / "jobs.db").string());
    ASSERT_TRUE(storage.ok()) << storage.status();
    storage_ = *std::move(storage);
  }

  // Writes job `name` `times` times, last modified at the clock's now.
  void WriteJob(const std::string& name, int times) {
    for (int i = 0; i < times; ++i) {
      persistence::JobRow row;
      row.name = name;
      row.creation_time_us = absl::ToUnixMicros(clock_->Now());
      row.last_modified_us = row.creation_time_us;
      row.status = "InProgress";
      row.record = absl::StrCat(name, " #", i);
      persistence::WriteBatch batch;
      batch.Put(row);
      ASSERT_TRUE(storage_->Write(batch).ok());
    }
  }

  int64_t FeedSize() {
    auto changes = storage_->ReadChangesAfter(0, 1 << 20);
    EXPECT_TRUE(changes.ok()) << changes.status();
    return changes.ok() ? static_cast<int64_t>(changes->size()) : -1;
  }

  ScopedTempDir dir_;
  std::shared_ptr<base::FakeClock> clock_ = std::make_shared<base::FakeClock>();
  std::unique_ptr<persistence::SqliteStorage> storage_;
};

TEST_F(ChangeFeedPrunerTest, APassDeletesSupersededChangesOlderThanTheRetentionInBatches) {
  ChangeFeedPruner pruner(
      storage_.get(),
      ChangeFeedPrunerOptions{.retention = absl::Minutes(10), .batch = 3, .clock = clock_});
  WriteJob("old", 8);  // 7 superseded.
  WriteJob("once", 1);
  clock_->Advance(absl::Minutes(9));
  WriteJob("recent", 4);  // 3 superseded, but within the retention.
  clock_->Advance(absl::Minutes(2));
  ASSERT_EQ(FeedSize(), 13);

  absl::StatusOr<int64_t> pruned = pruner.PruneOnce();
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(*pruned, 7);  // Three batches: 3 + 3 + 1.
  EXPECT_EQ(FeedSize(), 6);

  clock_->Advance(absl::Minutes(9));
  pruned = pruner.PruneOnce();
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(*pruned, 3);
  EXPECT_EQ(FeedSize(), 3);  // The latest change of each job.
  EXPECT_EQ(pruner.pruned(), 10);
}

TEST_F(ChangeFeedPrunerTest, TheThreadPrunesOncePerIntervalByTheClock) {
  ChangeFeedPruner pruner(storage_.get(), ChangeFeedPrunerOptions{.retention = absl::Minutes(10),
                                                                  .interval = absl::Minutes(1),
                                                                  .clock = clock_});
  WriteJob("job", 5);
  pruner.Start();
  // Nothing is old enough at the first pass; 11 minutes later it is.
  clock_->Advance(absl::Minutes(11));
  ::debugplane::testing::WaitUntil([&] {
    clock_->Advance(absl::Minutes(1));  // Each move wakes the thread.
    return pruner.pruned() >= 4;
  });
  EXPECT_EQ(pruner.pruned(), 4);
  pruner.Shutdown();
  EXPECT_EQ(FeedSize(), 1);
}

TEST_F(ChangeFeedPrunerTest, AStorageWithoutAFeedSaysSo) {
  class NoFeed final : public persistence::Storage {
   public:
    absl::Status Write(const persistence::WriteBatch&) override { return absl::OkStatus(); }
    absl::Status ForEachJob(
        const std::function<absl::Status(const persistence::JobRow&)>&) override {
      return absl::OkStatus();
    }
  } no_feed;
  ChangeFeedPruner pruner(&no_feed, ChangeFeedPrunerOptions{.clock = clock_});
  EXPECT_EQ(pruner.PruneOnce().status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace debugplane::core
