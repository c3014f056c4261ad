#include "rules_engine/scheduling/evaluation_scheduler.h"

#include <cmath>
#include <limits>
#include <map>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/rules_engine/scheduling/scheduler_test_fixture.h"
#include "tests/rules_engine/trial_writer.h"
#include "tests/rules_engine/worker_processes.h"

namespace debugplane::rules_engine {
namespace {

using ::debugplane::testing::CallSync;
using ::testing::HasSubstr;
using H = core::TrainingJobHandler;
using testing::RuleSpec;
using testing::TrialWriter;
using testing::WorkerProcess;

// The same ExplodingTensor twice, on the loss and on a gradient: a NaN in
// the loss is found, and the gradient's verdict at the end says how many
// tensors and steps were evaluated.
const std::vector<RuleSpec> kLossAndGradient = {
    {"ExplodingLoss", "ExplodingTensor", {{"tensor_regex", "CrossEntropyLoss.*"}}},
    {"ExplodingGradient", "ExplodingTensor", {{"tensor_regex", "gradient/.*"}}},
};

// One step of one worker: its loss (NaN if `nan`) and a gradient.
void AddLossStep(TrialWriter& writer, int64_t step, bool nan = false) {
  writer.AddStep(step, Mode::kTrain, step,
                 {{"CrossEntropyLoss_output_0",
                   {},
                   {nan ? std::numeric_limits<double>::quiet_NaN() : 1.0 / (1 + step)}},
                  {"gradient/fc1.weight", {2}, {0.1, -0.1}}});
}

// A scheduler on the real clock, polling every 50 ms, started for each test.
class EvaluationSchedulerTest : public testing::SchedulerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(SchedulerTest::SetUp());
    options_.poll_interval = absl::Milliseconds(50);
    options_.on_data_read = [this](const std::string& /*job*/, int64_t /*last_step*/) {
      absl::MutexLock lock(&data_reads_mu_);
      ++data_reads_;
    };
    StartScheduler();
  }

  // Turns of any job that read new data so far.
  int DataReads() {
    absl::MutexLock lock(&data_reads_mu_);
    return data_reads_;
  }

  // A job with the built-in debug rules `rules`, each named after itself
  // (hides the fixture's one-rule CreateJob).
  void CreateJob(const std::string& name, const std::string& trial,
                 const std::vector<std::string>& rules) {
    std::vector<RuleSpec> specs;
    for (const std::string& rule : rules) specs.push_back({rule, rule, {}});
    CreateJobWithRules(name, trial, specs);
  }

  absl::Mutex data_reads_mu_;
  int data_reads_ ABSL_GUARDED_BY(data_reads_mu_) = 0;
};

TEST_F(EvaluationSchedulerTest, FindsANanAsSoonAsItsStepLandsAndTheRestAtTheEnd) {
  const std::string trial = (dir_.path() / "trial").string();
  testing::TrialWriter writer(trial);
  CreateJob("job", trial, {"ExplodingTensor", "LossNotDecreasing"});
  for (int step = 0; step < 3; ++step) {
    writer.AddStep(step, Mode::kTrain, step,
                   {{"CrossEntropyLoss_output_0", {}, {1.0 - step * 0.1}}});
  }
  writer.AddStep(3, Mode::kTrain, 3,
                 {{"CrossEntropyLoss_output_0", {}, {std::numeric_limits<double>::infinity()}}});
  auto exploding = WaitForRule("job", "ExplodingTensor");
  EXPECT_EQ(exploding.rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound);
  EXPECT_THAT(exploding.status_details(), HasSubstr("step 3"));
  EXPECT_EQ(scheduler_->active_jobs(), 1u);  // LossNotDecreasing still waits for data.
  writer.EndTraining();
  auto loss = WaitForRule("job", "LossNotDecreasing");
  EXPECT_NE(loss.rule_evaluation_status(), v1::RuleEvaluationStatus::InProgress);
}

TEST_F(EvaluationSchedulerTest, ARuleWithoutItsDataEndsInAnErrorThatSaysWhy) {
  const std::string trial = (dir_.path() / "only-losses").string();
  testing::TrialWriter writer(trial);
  CreateJob("nograd", trial, {"VanishingGradient"});
  for (int step = 0; step < 3; ++step) {
    writer.AddStep(step, Mode::kTrain, step, {{"CrossEntropyLoss_output_0", {}, {0.5}}});
  }
  writer.EndTraining();
  auto status = WaitForRule("nograd", "VanishingGradient");
  EXPECT_EQ(status.rule_evaluation_status(), v1::RuleEvaluationStatus::Error);
  EXPECT_THAT(status.status_details(), HasSubstr("gradient"));
  EXPECT_THAT(status.status_details(), HasSubstr("only-losses"));
  EXPECT_THAT(status.status_details(), HasSubstr("CrossEntropyLoss_output_0"));
}

TEST_F(EvaluationSchedulerTest, ObjectStoreAndMissingHookAreClearErrors) {
  CreateJob("s3job", "s3://bucket/debug-output", {"ExplodingTensor"});
  auto status = WaitForRule("s3job", "ExplodingTensor");
  EXPECT_EQ(status.rule_evaluation_status(), v1::RuleEvaluationStatus::Error);
  EXPECT_THAT(status.status_details(), HasSubstr("object storage"));
}

TEST_F(EvaluationSchedulerTest, StoppingAJobStopsItsEvaluation) {
  const std::string trial = (dir_.path() / "never").string();
  CreateJob("stopped", trial, {"ExplodingTensor"});
  v1::StopTrainingJobRequest stop;
  stop.set_training_job_name("stopped");
  ASSERT_TRUE(CallSync<v1::StopTrainingJobResponse>(*manager_, &H::StopTrainingJob, stop).ok());
  EXPECT_EQ(WaitForRule("stopped", "ExplodingTensor").rule_evaluation_status(),
            v1::RuleEvaluationStatus::Stopped);
  ::debugplane::testing::WaitUntil([&] { return scheduler_->active_jobs() == 0; });
  EXPECT_EQ(scheduler_->active_jobs(), 0u);
}

TEST_F(EvaluationSchedulerTest, SimilarAcrossRunsComparesWithAnotherJobsTrial) {
  auto write = [&](const std::string& name, double last_loss) {
    testing::TrialWriter writer((dir_.path() / name).string());
    for (int step = 0; step < 4; ++step) {
      writer.AddStep(step, Mode::kTrain, step,
                     {{"CrossEntropyLoss_output_0", {}, {step == 3 ? last_loss : 0.5}}});
    }
    writer.EndTraining();
  };
  write("base", 0.5);
  write("same", 0.5);
  write("different", 0.9);
  CreateJob("base", (dir_.path() / "base").string(), {});
  auto similar = [&](const std::string& name, const std::string& other) {
    CreateJobWithRules(name, (dir_.path() / name).string(),
                       {{"SimilarAcrossRuns", "SimilarAcrossRuns", {{"other_trials", other}}}});
  };
  similar("same", "base");                                // By job name.
  similar("different", (dir_.path() / "base").string());  // By path.
  EXPECT_EQ(WaitForRule("same", "SimilarAcrossRuns").rule_evaluation_status(),
            v1::RuleEvaluationStatus::NoIssuesFound)
      << WaitForRule("same", "SimilarAcrossRuns").status_details();
  auto different = WaitForRule("different", "SimilarAcrossRuns");
  EXPECT_EQ(different.rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound)
      << different.status_details();
  EXPECT_THAT(different.status_details(), HasSubstr("step 3"));

  // An other_trials that names no job (a path outside the data roots is
  // refused at CreateTrainingJob) is an error that says so.
  write("unknown", 0.5);
  similar("unknown", "no-such-job");
  auto unknown = WaitForRule("unknown", "SimilarAcrossRuns");
  EXPECT_EQ(unknown.rule_evaluation_status(), v1::RuleEvaluationStatus::Error);
  EXPECT_THAT(unknown.status_details(), HasSubstr("other_trials 'no-such-job'"));
}

TEST_F(EvaluationSchedulerTest, ARuleRecordsTheStepItEndedAtWithItsStatus) {
  const std::string trial = (dir_.path() / "nan-at-2").string();
  TrialWriter writer(trial);
  for (int step = 0; step < 6; ++step) AddLossStep(writer, step, /*nan=*/step == 2);
  CreateJob("nan-at-2", trial, {"ExplodingTensor"});
  const v1::DebugRuleEvaluationStatus status = WaitForRule("nan-at-2", "ExplodingTensor");
  EXPECT_EQ(status.rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound);
  EXPECT_THAT(status.status_details(), HasSubstr("step 2"));
  ASSERT_TRUE(status.has_last_evaluated_step());
  EXPECT_EQ(status.last_evaluated_step(), 2);
}

TEST_F(EvaluationSchedulerTest, OneWorkerEndingDoesNotEndATrialOfTwo) {
  // torch.distributed with include_workers "all": rank 1 writes its steps
  // and training_job_end.ts and exits; rank 0 writes its last step, a NaN,
  // after that.
  const std::string trial = (dir_.path() / "ranks").string();
  CreateJobWithRules("ranks", trial, kLossAndGradient);
  constexpr int kSteps = 5;
  WorkerProcess rank1(trial, 1, 2, [](TrialWriter& writer) {
    for (int step = 0; step < kSteps; ++step) {
      AddLossStep(writer, step);
      absl::SleepFor(absl::Milliseconds(10));
    }
  });
  WorkerProcess rank0(trial, 0, 2, [&trial](TrialWriter& writer) {
    for (int step = 0; step + 1 < kSteps; ++step) AddLossStep(writer, step);
    // A moment after rank 1 ended (long enough for the scheduler to see it).
    ASSERT_TRUE(testing::WaitForFile(trial + "/training_job_end.ts", absl::Seconds(30)));
    absl::SleepFor(absl::Milliseconds(300));
    AddLossStep(writer, kSteps - 1, /*nan=*/true);
  });
  EXPECT_EQ(rank1.Wait(absl::Seconds(30)), 0);
  EXPECT_EQ(rank0.Wait(absl::Seconds(30)), 0);

  const v1::DebugRuleEvaluationStatus loss = WaitForRule("ranks", "ExplodingLoss");
  EXPECT_EQ(loss.rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound)
      << loss.status_details();
  EXPECT_THAT(loss.status_details(), HasSubstr("step 4"));
  EXPECT_EQ(loss.last_evaluated_step(), kSteps - 1);

  // Both processes wrote training_job_end.ts, but only the job can tell that
  // every worker ended: the gradient rule concludes when it does, over every
  // step of both workers.
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(RuleStatus("ranks", "ExplodingGradient").rule_evaluation_status(),
            v1::RuleEvaluationStatus::InProgress);
  ReportCompleted("ranks");
  const v1::DebugRuleEvaluationStatus gradient = WaitForRule("ranks", "ExplodingGradient");
  EXPECT_EQ(gradient.rule_evaluation_status(), v1::RuleEvaluationStatus::NoIssuesFound);
  EXPECT_THAT(gradient.status_details(), HasSubstr("10 evaluations over 5 steps"));
  EXPECT_EQ(gradient.last_evaluated_step(), kSteps - 1);
}

TEST_F(EvaluationSchedulerTest, StepsOfWorkersArrivingOutOfOrderAreEachEvaluatedOnceAndWhole) {
  const std::string trial = (dir_.path() / "out-of-order").string();
  CreateJobWithRules("out-of-order", trial, kLossAndGradient);
  TrialWriter worker0(trial, "worker_0", 2);
  TrialWriter worker1(trial, "worker_1", 2);
  // Pauses let the scheduler look at every intermediate state: each ends
  // when a turn has read the new data, or after 120 ms.
  const auto pause = [&] {
    const int reads = DataReads();
    ::debugplane::testing::WaitUntil([&] { return DataReads() > reads; }, absl::Milliseconds(120));
  };
  for (int step = 0; step < 3; ++step) AddLossStep(worker1, step);
  pause();
  AddLossStep(worker0, 0);
  pause();
  // worker_1 runs ahead (its step 5 before worker_0's step 1), then ends.
  for (int step = 3; step < 6; ++step) AddLossStep(worker1, step);
  worker1.EndTraining();
  pause();
  // worker_0's part of step 1, which worker_1 wrote long ago, holds a NaN.
  AddLossStep(worker0, 1, /*nan=*/true);
  pause();
  for (int step = 2; step < 6; ++step) {
    AddLossStep(worker0, step);
    pause();
  }
  worker0.EndTraining();

  const v1::DebugRuleEvaluationStatus loss = WaitForRule("out-of-order", "ExplodingLoss");
  EXPECT_EQ(loss.rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound)
      << loss.status_details();
  EXPECT_THAT(loss.status_details(), HasSubstr("step 1"));
  EXPECT_EQ(loss.last_evaluated_step(), 1);
  ReportCompleted("out-of-order");
  // Six steps, each once with both workers' gradients.
  const v1::DebugRuleEvaluationStatus gradient = WaitForRule("out-of-order", "ExplodingGradient");
  EXPECT_EQ(gradient.rule_evaluation_status(), v1::RuleEvaluationStatus::NoIssuesFound);
  EXPECT_THAT(gradient.status_details(), HasSubstr("12 evaluations over 6 steps"));
  EXPECT_EQ(gradient.last_evaluated_step(), 5);
}

TEST_F(EvaluationSchedulerTest, AJobThatEndsWithoutATrialEndsItsRulesInAnError) {
  // No training_job_end.ts will ever come: the job's end is enough.
  CreateJob("nothing-saved", (dir_.path() / "nothing-saved").string(), {"ExplodingTensor"});
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(RuleStatus("nothing-saved", "ExplodingTensor").rule_evaluation_status(),
            v1::RuleEvaluationStatus::InProgress);
  ReportCompleted("nothing-saved");
  const v1::DebugRuleEvaluationStatus status = WaitForRule("nothing-saved", "ExplodingTensor");
  EXPECT_EQ(status.rule_evaluation_status(), v1::RuleEvaluationStatus::Error);
  EXPECT_THAT(status.status_details(), HasSubstr("does not exist"));
}

}  // namespace
}  // namespace debugplane::rules_engine
