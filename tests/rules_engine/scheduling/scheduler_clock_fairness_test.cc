// The scheduler's time comes from its clock (a FakeClock here: stall and
// polling behaviour without sleeping), and a job with many pending steps
// yields its worker to another job's new step (fairness, issue 10).

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/rules_engine/scheduling/scheduler_test_fixture.h"
#include "tests/rules_engine/trial_writer.h"

namespace debugplane::rules_engine {
namespace {

using ::testing::HasSubstr;
using testing::TrialWriter;

class SchedulerClockTest : public testing::FakeClockSchedulerTest {};

TEST_F(SchedulerClockTest, StallIsFoundWhenTheClockPassesTheThreshold) {
  // Time-driven: only the polling pass (a minute of the FakeClock) brings
  // the job to a worker when no data comes, and the stall threshold is an
  // hour of the same clock. Nothing waits for real minutes.
  options_.poll_interval = absl::Minutes(1);
  StartScheduler();
  const std::string trial = (dir_.path() / "stalled").string();
  TrialWriter writer(trial);
  writer.AddStep(0, Mode::kTrain, 0, {{"CrossEntropyLoss_output_0", {}, {0.5}}});
  CreateJob("stalled", trial, "StalledTrainingRule", {{"threshold", "3600"}});
  // The step is read (its progress recorded) at the FakeClock's start.
  ASSERT_TRUE(::debugplane::testing::WaitedFor("the step's progress", [&] {
    return RuleStatus("stalled", "StalledTrainingRule").has_last_evaluated_step();
  }));

  clock_->Advance(absl::Minutes(59));  // Polled, not stalled yet.
  // Real time, on purpose: a poll that finds no data leaves nothing to wait
  // on, so the test gives a wrong verdict 100 ms to land, if any.
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(RuleStatus("stalled", "StalledTrainingRule").rule_evaluation_status(),
            v1::RuleEvaluationStatus::InProgress);

  clock_->Advance(absl::Minutes(2));  // Past the threshold: the next poll ticks.
  const v1::DebugRuleEvaluationStatus status = WaitForRule("stalled", "StalledTrainingRule");
  EXPECT_EQ(status.rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound);
  EXPECT_THAT(status.status_details(), HasSubstr("3600s"));
}

// A job replaying many pending steps and a job with one new NaN step, one
// worker: the NaN is found while the replay is still early in its trial,
// because every turn of the replay stops at max_steps_per_turn and queues
// it behind the other job. Without the bound the replay's one turn reads all
// its steps first.
TEST_F(SchedulerClockTest, JobWithManyPendingStepsYieldsToAnotherJobsNewStep) {
  constexpr int kReplaySteps = 600;
  options_.worker_threads = 1;
  // The worker takes the backlog turns itself (no backlog threads): the
  // replay's turns then alternate with the other job's on one thread.
  options_.backlog_threads = 0;
  options_.max_steps_per_turn = 8;
  options_.turn_time_slice = absl::InfiniteDuration();  // The step bound alone.
  options_.progress_interval = absl::ZeroDuration();    // Every turn's progress.
  options_.poll_interval = absl::InfiniteDuration();
  {
    TrialWriter replay((dir_.path() / "replay").string());
    for (int step = 0; step < kReplaySteps; ++step) {
      replay.AddStep(step, Mode::kTrain, step, {{"CrossEntropyLoss_output_0", {}, {0.5}}});
    }
    TrialWriter nan((dir_.path() / "nan").string());
    nan.AddStep(0, Mode::kTrain, 0,
                {{"CrossEntropyLoss_output_0", {}, {std::numeric_limits<double>::quiet_NaN()}}});
  }
  // Both created before the scheduler starts: it queues them by name, the
  // replay ("a-...") first, on its single worker.
  CreateJob("a-replay", (dir_.path() / "replay").string(), "ExplodingTensor");
  CreateJob("b-nan", (dir_.path() / "nan").string(), "ExplodingTensor");

  // The replay's recorded progress when the NaN's IssuesFound is committed.
  absl::Mutex mu;
  int64_t replay_progress = -1;
  int64_t replay_progress_at_issue = std::numeric_limits<int64_t>::min();
  const auto observer = manager_->AddCommitObserver(
      [&](const std::string& name, std::shared_ptr<const core::JobRecord> job) {
        if (job == nullptr || job->debug_rule_evaluation_statuses_size() == 0) return;
        absl::MutexLock lock(&mu);
        const auto& status = job->debug_rule_evaluation_statuses(0);
        if (name == "a-replay" && status.has_last_evaluated_step()) {
          replay_progress = status.last_evaluated_step();
        }
        if (name == "b-nan" &&
            status.rule_evaluation_status() == v1::RuleEvaluationStatus::IssuesFound &&
            replay_progress_at_issue == std::numeric_limits<int64_t>::min()) {
          replay_progress_at_issue = replay_progress;
        }
      });
  StartScheduler();
  EXPECT_EQ(WaitForRule("b-nan", "ExplodingTensor").rule_evaluation_status(),
            v1::RuleEvaluationStatus::IssuesFound);
  manager_->RemoveCommitObserver(observer.id);
  absl::MutexLock lock(&mu);
  // One turn of the replay (8 steps: progress 7) came before the NaN job's
  // turn; a few more may be recorded before its IssuesFound commits.
  EXPECT_GE(replay_progress_at_issue, -1);
  EXPECT_LT(replay_progress_at_issue, kReplaySteps / 4)
      << "the replay read " << replay_progress_at_issue + 1 << " of its " << kReplaySteps
      << " steps before the other job's NaN was reported";
}

}  // namespace
}  // namespace debugplane::rules_engine
