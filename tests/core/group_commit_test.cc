// Group commit of the job manager with clients that wait for each reply
// (TrainingJobManagerOptions::max_group_wait), over SQLite with a write
// latency added, as a slow disk's fsync would.

#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/training_job_manager.h"
#include "gtest/gtest.h"
#include "persistence/sqlite_storage.h"
#include "tests/core/scoped_temp_dir.h"

namespace debugplane::core {
namespace {

using ::debugplane::testing::ScopedTempDir;

// Real storage whose every write takes at least `latency` longer.
class SlowStorage final : public persistence::Storage {
 public:
  SlowStorage(std::unique_ptr<persistence::Storage> base, absl::Duration latency)
      : base_(std::move(base)), latency_(latency) {}
  absl::Status Write(const persistence::WriteBatch& batch) override {
    absl::SleepFor(latency_);
    return base_->Write(batch);
  }
  absl::Status ForEachJob(
      const std::function<absl::Status(const persistence::JobRow&)>& visit) override {
    return base_->ForEachJob(visit);
  }

 private:
  const std::unique_ptr<persistence::Storage> base_;
  const absl::Duration latency_;
};

v1::CreateTrainingJobRequest JobRequest(const std::string& name) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/output");
  return request;
}

class GroupCommitTest : public ::testing::Test {
 protected:
  static constexpr absl::Duration kWriteLatency = absl::Milliseconds(40);

  std::unique_ptr<TrainingJobManager> Open(const std::string& db, absl::Duration max_group_wait) {
    auto sqlite = persistence::SqliteStorage::Open((dir_.path() / db).string());
    EXPECT_TRUE(sqlite.ok()) << sqlite.status();
    if (!sqlite.ok()) return nullptr;
    TrainingJobManagerOptions options;
    options.max_group_wait = max_group_wait;
    auto manager = TrainingJobManager::Create(
        std::make_unique<SlowStorage>(*std::move(sqlite), kWriteLatency), std::move(options));
    EXPECT_TRUE(manager.ok()) << manager.status();
    return manager.ok() ? *std::move(manager) : nullptr;
  }

  // `callers` threads each create `rounds` jobs, one after the other. (A
  // std::promise, not CallSync's absl::Notification: sixteen threads
  // waiting at once make absl's deadlock detector race in ways TSan sees
  // but cannot attribute.)
  static void CreateInClosedLoop(TrainingJobManager& manager, int callers, int rounds) {
    std::vector<std::thread> threads;
    for (int c = 0; c < callers; ++c) {
      threads.emplace_back([&manager, c, rounds] {
        for (int r = 0; r < rounds; ++r) {
          const v1::CreateTrainingJobRequest request = JobRequest(absl::StrCat("c", c, "-", r));
          v1::CreateTrainingJobResponse response;
          std::promise<absl::Status> done;
          manager.CreateTrainingJob(request, &response,
                                    [&done](absl::Status status) { done.set_value(status); });
          const absl::Status status = done.get_future().get();
          EXPECT_TRUE(status.ok()) << status;
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
  }

  ScopedTempDir dir_;
};

TEST_F(GroupCommitTest, ClosedLoopCallersShareOneWritePerRoundInsteadOfAlternating) {
  constexpr int kCallers = 16;
  constexpr int kRounds = 8;
  auto manager = Open("grouped.db", absl::Milliseconds(100));
  ASSERT_NE(manager, nullptr);
  CreateInClosedLoop(*manager, kCallers, kRounds);
  const TrainingJobManager::CommitStats grouped = manager->commit_stats();
  EXPECT_EQ(grouped.changes, kCallers * kRounds);
  // One write per round once the callers are in step (the first arrivals
  // may take a write or two of their own); alternating halves would take
  // about two per round.
  EXPECT_LE(grouped.writes, kRounds + 3) << "waited " << grouped.waiting;
  // Never longer than half a write per group.
  EXPECT_LE(grouped.waiting, grouped.writes * kWriteLatency / 2);

  // Without the wait, the same load needs more writes.
  auto alternating = Open("alternating.db", absl::ZeroDuration());
  ASSERT_NE(alternating, nullptr);
  CreateInClosedLoop(*alternating, kCallers, kRounds);
  EXPECT_GT(alternating->commit_stats().writes, grouped.writes);
  EXPECT_EQ(alternating->commit_stats().waiting, absl::ZeroDuration());
}

TEST_F(GroupCommitTest, ALoneCallerNeverWaits) {
  auto manager = Open("lone.db", absl::Milliseconds(100));
  ASSERT_NE(manager, nullptr);
  CreateInClosedLoop(*manager, /*callers=*/1, /*rounds=*/6);
  const TrainingJobManager::CommitStats stats = manager->commit_stats();
  EXPECT_EQ(stats.writes, 6);
  // Its next change is the one expected: the committer starts at once.
  EXPECT_EQ(stats.waiting, absl::ZeroDuration());
}

}  // namespace
}  // namespace debugplane::core
