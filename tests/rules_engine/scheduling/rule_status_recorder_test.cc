// Rule statuses the storage refuses (a full disk) are retried until durable:
// the recorder alone, and the scheduler through it, over a real SQLite-backed
// manager whose writes fail on command. Retries are timed by a FakeClock.

#include "rules_engine/scheduling/rule_status_recorder.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "base/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "persistence/fault_injecting_storage.h"
#include "persistence/sqlite/sqlite_storage.h"
#include "rules_engine/scheduling/evaluation_scheduler.h"
#include "tests/rules_engine/scheduling/scheduler_test_fixture.h"
#include "tests/rules_engine/trial_writer.h"

namespace debugplane::rules_engine {
namespace {

using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::WaitUntil;
using ::testing::HasSubstr;
using H = core::TrainingJobHandler;

class RuleStatusRecorderTest : public ::testing::Test {
 protected:
  void SetUp() override { OpenManager(); }

  // A manager over <dir>/jobs.db behind a FaultInjectingStorage (storage_).
  void OpenManager() {
    auto sqlite = persistence::SqliteStorage::Open((dir_.path() / "jobs.db").string());
    ASSERT_TRUE(sqlite.ok()) << sqlite.status();
    auto faulty = std::make_unique<persistence::FaultInjectingStorage>(*std::move(sqlite));
    storage_ = faulty.get();
    core::TrainingJobManagerOptions options;
    options.validation.data_roots.push_back(dir_.path());
    auto manager = core::TrainingJobManager::Create(std::move(faulty), std::move(options));
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *std::move(manager);
  }

  // The rule statuses as durable: the manager closed and the database read
  // again by a new one.
  v1::DebugRuleEvaluationStatus DurableStatus(const std::string& job) {
    manager_.reset();
    OpenManager();
    return manager_->GetJob(job)->debug_rule_evaluation_statuses(0);
  }

  // A job whose tensors go to <dir>/<name> with rule ExplodingTensor, which
  // sends an email when it finds an issue.
  void CreateJob(const std::string& name) {
    v1::CreateTrainingJobRequest request = testing::NewJobRequest(name);
    request.mutable_debug_hook_config()->set_s3_output_path((dir_.path() / name).string());
    testing::AddBuiltinDebugRule(
        request, {"ExplodingTensor",
                  "ExplodingTensor",
                  {{"action_json", R"({"name": "email", "endpoint": "ml-team@example.com"})"}}});
    testing::CreateJobOrFail(*manager_, request);
  }

  v1::DebugRuleEvaluationStatus Status(const std::string& job) {
    return manager_->GetJob(job)->debug_rule_evaluation_statuses(0);
  }

  ScopedTempDir dir_;
  persistence::FaultInjectingStorage* storage_ = nullptr;  // Owned by manager_.
  std::unique_ptr<core::TrainingJobManager> manager_;
  std::shared_ptr<base::FakeClock> clock_ = std::make_shared<base::FakeClock>();
};

TEST_F(RuleStatusRecorderTest, ARefusedStatusIsRetriedWithBackoffUntilDurableAndActsOnce) {
  CreateJob("full-disk");
  RuleStatusRecorder recorder(
      manager_.get(),
      {.clock = clock_, .initial_backoff = absl::Seconds(1), .max_backoff = absl::Seconds(4)});
  storage_->FailWrites(absl::ResourceExhaustedError("disk full (injected)"));
  const absl::Time start = clock_->Now();
  recorder.Record("full-disk", "ExplodingTensor", 2, v1::RuleEvaluationStatus::IssuesFound,
                  "step 2: NaN");
  const auto next_retry = [&] { return recorder.NextRetry("full-disk", "ExplodingTensor"); };
  ASSERT_TRUE(WaitUntil([&] { return next_retry().has_value(); }));
  EXPECT_EQ(*next_retry(), start + absl::Seconds(1));
  EXPECT_EQ(recorder.pending(), 1u);
  EXPECT_EQ(Status("full-disk").rule_evaluation_status(), v1::RuleEvaluationStatus::InProgress);

  // Not sent again before the backoff; refused again after it, and the wait
  // doubles, up to max_backoff.
  const int writes = storage_->write_calls();
  clock_->Advance(absl::Milliseconds(900));
  // Real time, on purpose (here and below): a write that must not happen
  // leaves nothing to wait on, so the test gives it a moment to happen.
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(storage_->write_calls(), writes);
  clock_->Advance(absl::Milliseconds(100));
  ASSERT_TRUE(WaitUntil([&] { return next_retry() == start + absl::Seconds(1 + 2); }));
  EXPECT_GT(storage_->write_calls(), writes);
  clock_->Advance(absl::Seconds(2));
  ASSERT_TRUE(WaitUntil([&] { return next_retry() == start + absl::Seconds(3 + 4); }));
  clock_->Advance(absl::Seconds(4));
  ASSERT_TRUE(WaitUntil([&] { return next_retry() == start + absl::Seconds(7 + 4); }));
  EXPECT_EQ(Status("full-disk").rule_evaluation_status(), v1::RuleEvaluationStatus::InProgress);

  // Space is back: the next retry makes it durable, with its step and one
  // action.
  storage_->Heal();
  clock_->Advance(absl::Seconds(4));
  ASSERT_TRUE(WaitUntil([&] { return recorder.pending() == 0; }));
  EXPECT_EQ(Status("full-disk").rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound);
  recorder.Shutdown();
  const v1::DebugRuleEvaluationStatus durable = DurableStatus("full-disk");
  EXPECT_EQ(durable.rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound);
  EXPECT_EQ(durable.status_details(), "step 2: NaN");
  EXPECT_EQ(durable.last_evaluated_step(), 2);
  EXPECT_EQ(manager_->GetJob("full-disk")->rule_actions_size(), 1);
}

TEST_F(RuleStatusRecorderTest, RecordsOfOneRuleAreWrittenInOrder) {
  CreateJob("ordered");
  RuleStatusRecorder recorder(manager_.get(),
                              {.clock = clock_, .initial_backoff = absl::Seconds(1)});
  storage_->FailWrites(absl::ResourceExhaustedError("disk full (injected)"));
  recorder.Record("ordered", "ExplodingTensor", -1, v1::RuleEvaluationStatus::IssuesFound, "first");
  ASSERT_TRUE(
      WaitUntil([&] { return recorder.NextRetry("ordered", "ExplodingTensor").has_value(); }));
  // A later record of the same rule waits behind the refused one: sent now,
  // it would be durable first.
  storage_->Heal();
  recorder.Record("ordered", "ExplodingTensor", -1, v1::RuleEvaluationStatus::Error, "second");
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(Status("ordered").rule_evaluation_status(), v1::RuleEvaluationStatus::InProgress);
  EXPECT_EQ(recorder.pending(), 2u);
  clock_->Advance(absl::Seconds(1));
  // The first is durable; the second is refused for good (the rule is
  // already terminal) and dropped, not retried.
  ASSERT_TRUE(WaitUntil([&] { return recorder.pending() == 0; }));
  EXPECT_EQ(Status("ordered").rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound);
  EXPECT_EQ(Status("ordered").status_details(), "first");
}

TEST_F(RuleStatusRecorderTest, TheSchedulerRetriesAnIssueFoundWhileTheDiskWasFull) {
  CreateJob("scheduled");
  EvaluationSchedulerOptions options;
  options.data_roots.push_back(dir_.path());
  options.poll_interval = absl::Milliseconds(50);
  options.status_retries = {.clock = clock_, .initial_backoff = absl::Seconds(1)};
  EvaluationScheduler scheduler(manager_.get(), options);
  scheduler.Start();

  storage_->FailWrites(absl::ResourceExhaustedError("disk full (injected)"));
  const int writes_before = storage_->write_calls();
  testing::TrialWriter writer((dir_.path() / "scheduled").string());
  for (int step = 0; step < 4; ++step) {
    writer.AddStep(step, Mode::kTrain, step,
                   {{"CrossEntropyLoss_output_0",
                     {},
                     {step == 2 ? std::numeric_limits<double>::quiet_NaN() : 0.5}}});
  }
  // The verdict was reached and its write refused; the rule is still
  // InProgress (and is not evaluated again: the verdict is only retried).
  ASSERT_TRUE(WaitUntil([&] { return storage_->write_calls() > writes_before; }));
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(Status("scheduled").rule_evaluation_status(), v1::RuleEvaluationStatus::InProgress);

  storage_->Heal();
  // Time passes (whenever the retry was scheduled, it comes).
  ASSERT_TRUE(WaitUntil([&] {
    clock_->Advance(absl::Seconds(1));
    return Status("scheduled").rule_evaluation_status() != v1::RuleEvaluationStatus::InProgress;
  }));
  scheduler.Shutdown();
  const v1::DebugRuleEvaluationStatus durable = DurableStatus("scheduled");
  EXPECT_EQ(durable.rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound);
  EXPECT_THAT(durable.status_details(), HasSubstr("step 2"));
  EXPECT_EQ(durable.last_evaluated_step(), 2);
  EXPECT_EQ(manager_->GetJob("scheduled")->rule_actions_size(), 1);
}

}  // namespace
}  // namespace debugplane::rules_engine
