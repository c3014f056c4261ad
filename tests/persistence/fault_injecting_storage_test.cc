#include "persistence/fault_injecting_storage.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "persistence/sqlite/sqlite_storage.h"
#include "tests/persistence/persistence_test_util.h"

namespace debugplane::persistence {
namespace {

using ::debugplane::persistence::testing::AsTuple;
using ::debugplane::persistence::testing::AsTuples;
using ::debugplane::persistence::testing::MakeRow;
using ::debugplane::persistence::testing::ReadAll;
using ::debugplane::persistence::testing::ScopedTempDir;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

WriteBatch OneRow(const std::string& name, int n) {
  WriteBatch batch;
  batch.Put(MakeRow(name, n));
  return batch;
}

class FaultInjectingStorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto sqlite = SqliteStorage::Open(db_path());
    ASSERT_TRUE(sqlite.ok()) << sqlite.status();
    storage_ = std::make_unique<FaultInjectingStorage>(*std::move(sqlite));
  }

  std::string db_path() const { return (dir_.path() / "jobs.db").string(); }

  std::vector<testing::RowTuple> Contents() { return testing::Contents(*storage_); }

  ScopedTempDir dir_;
  std::unique_ptr<FaultInjectingStorage> storage_;
};

TEST_F(FaultInjectingStorageTest, ForwardsWhileNothingIsArmed) {
  ASSERT_TRUE(storage_->Write(OneRow("a", 1)).ok());
  EXPECT_THAT(Contents(), ElementsAre(AsTuple(MakeRow("a", 1))));
  EXPECT_EQ(storage_->write_calls(), 1);
}

TEST_F(FaultInjectingStorageTest, FailsTheNextCountWritesWithoutTouchingTheStorage) {
  storage_->FailWrites(absl::ResourceExhaustedError("disk full (injected)"), 2);
  EXPECT_EQ(storage_->Write(OneRow("a", 1)), absl::ResourceExhaustedError("disk full (injected)"));
  EXPECT_EQ(storage_->Write(OneRow("b", 2)), absl::ResourceExhaustedError("disk full (injected)"));
  EXPECT_THAT(Contents(), IsEmpty());
  EXPECT_TRUE(storage_->Write(OneRow("c", 3)).ok());
  EXPECT_THAT(Contents(), ElementsAre(AsTuple(MakeRow("c", 3))));
  EXPECT_EQ(storage_->write_calls(), 3);
}

TEST_F(FaultInjectingStorageTest, AFailedBatchLeavesNothingEvenAfterReopening) {
  ASSERT_TRUE(storage_->Write(OneRow("keep", 1)).ok());
  storage_->FailWrites(absl::UnavailableError("injected"), 1);
  WriteBatch batch;
  batch.Put(MakeRow("new", 2));
  batch.Delete("keep");
  EXPECT_EQ(storage_->Write(batch).code(), absl::StatusCode::kUnavailable);
  storage_.reset();

  auto reopened = SqliteStorage::Open(db_path());
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  auto rows = ReadAll(**reopened);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(AsTuples(*rows), ElementsAre(AsTuple(MakeRow("keep", 1))));
}

TEST_F(FaultInjectingStorageTest, ANegativeCountFailsEveryWriteUntilHealed) {
  storage_->FailWrites(absl::InternalError("broken"));
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(storage_->Write(OneRow("a", i)).code(), absl::StatusCode::kInternal);
  }
  storage_->Heal();
  EXPECT_TRUE(storage_->Write(OneRow("a", 9)).ok());
  EXPECT_THAT(Contents(), ElementsAre(AsTuple(MakeRow("a", 9))));
  EXPECT_EQ(storage_->write_calls(), 6);
}

TEST_F(FaultInjectingStorageTest, FailsReadsUntilHealed) {
  ASSERT_TRUE(storage_->Write(OneRow("a", 1)).ok());
  storage_->FailReads(absl::DataLossError("unreadable (injected)"));
  int visited = 0;
  auto count = [&](const JobRow&) {
    ++visited;
    return absl::OkStatus();
  };
  EXPECT_EQ(storage_->ForEachJob(count), absl::DataLossError("unreadable (injected)"));
  EXPECT_EQ(visited, 0);
  EXPECT_TRUE(storage_->Write(OneRow("b", 2)).ok());  // Reads failing leave writes alone.

  storage_->Heal();
  EXPECT_TRUE(storage_->ForEachJob(count).ok());
  EXPECT_EQ(visited, 2);
}

TEST_F(FaultInjectingStorageTest, ArmingAndHealingWhileOtherThreadsWrite) {
  constexpr int kThreads = 4;
  constexpr int kWrites = 50;
  std::atomic<int> succeeded = 0;
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < kWrites; ++i) {
        if (storage_->Write(OneRow(absl::StrCat("t", t, "-", i), i)).ok()) succeeded.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < 20; ++i) {
    storage_->FailWrites(absl::UnavailableError("flaky"), 3);
    std::this_thread::yield();
    storage_->Heal();
  }
  for (std::thread& writer : writers) writer.join();

  EXPECT_EQ(storage_->write_calls(), kThreads * kWrites);
  EXPECT_EQ(Contents().size(), static_cast<size_t>(succeeded.load()));
}

}  // namespace
}  // namespace debugplane::persistence
