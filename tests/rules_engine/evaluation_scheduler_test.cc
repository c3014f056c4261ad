#include "rules_engine/evaluation_scheduler.h"

#include <limits>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"
#include "tests/rules_engine/trial_writer.h"

namespace debugplane::rules_engine {
namespace {

using ::debugplane::testing::CallSync;
using ::debugplane::testing::ScopedTempDir;
using ::testing::HasSubstr;
using H = core::TrainingJobHandler;

class EvaluationSchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto manager = ::debugplane::testing::OpenTestManager(dir_.path());
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *std::move(manager);
    EvaluationSchedulerOptions scheduler_options;
    scheduler_options.data_roots.push_back(dir_.path());
    scheduler_options.poll_interval = absl::Milliseconds(50);
    scheduler_ = std::make_unique<EvaluationScheduler>(manager_.get(), scheduler_options);
    scheduler_->Start();
  }
  void TearDown() override {
    scheduler_.reset();
    manager_.reset();
  }

  void CreateJob(const std::string& name, const std::string& trial,
                 const std::vector<std::string>& rules) {
    v1::CreateTrainingJobRequest request;
    request.set_training_job_name(name);
    request.set_role_arn("arn:aws:iam::111122223333:role/Test");
    request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
    request.mutable_debug_hook_config()->set_s3_output_path(trial);
    for (const std::string& rule_name : rules) {
      auto* rule = request.add_debug_rule_configurations();
      rule->set_rule_configuration_name(rule_name);
      rule->set_rule_evaluator_image("builtin");
      (*rule->mutable_rule_parameters())["rule_to_invoke"] = rule_name;
    }
    auto created =
        CallSync<v1::CreateTrainingJobResponse>(*manager_, &H::CreateTrainingJob, request);
    ASSERT_TRUE(created.ok()) << created.status();
  }

  // Waits until rule `rule` of `job` is terminal; returns its status.
  v1::DebugRuleEvaluationStatus WaitForRule(const std::string& job, const std::string& rule) {
    for (int i = 0; i < 1000; ++i) {
      auto record = manager_->GetJob(job);
      for (const auto& status : record->debug_rule_evaluation_statuses()) {
        if (status.rule_configuration_name() == rule &&
            core::IsTerminal(status.rule_evaluation_status())) {
          return status;
        }
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    ADD_FAILURE() << rule << " of " << job << " never ended";
    return {};
  }

  ScopedTempDir dir_;
  std::unique_ptr<core::TrainingJobManager> manager_;
  std::unique_ptr<EvaluationScheduler> scheduler_;
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
  for (int i = 0; i < 100 && scheduler_->active_jobs() > 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
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
    v1::CreateTrainingJobRequest request;
    request.set_training_job_name(name);
    request.set_role_arn("arn:aws:iam::111122223333:role/Test");
    request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
    request.mutable_debug_hook_config()->set_s3_output_path((dir_.path() / name).string());
    auto* rule = request.add_debug_rule_configurations();
    rule->set_rule_configuration_name("SimilarAcrossRuns");
    rule->set_rule_evaluator_image("builtin");
    (*rule->mutable_rule_parameters())["rule_to_invoke"] = "SimilarAcrossRuns";
    (*rule->mutable_rule_parameters())["other_trials"] = other;
    auto created =
        CallSync<v1::CreateTrainingJobResponse>(*manager_, &H::CreateTrainingJob, request);
    ASSERT_TRUE(created.ok()) << created.status();
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

  // An other_trials outside the data roots is an error that says so.
  write("escape", 0.5);
  similar("escape", "/etc");
  auto escaped = WaitForRule("escape", "SimilarAcrossRuns");
  EXPECT_EQ(escaped.rule_evaluation_status(), v1::RuleEvaluationStatus::Error);
  EXPECT_THAT(escaped.status_details(), HasSubstr("other_trials '/etc'"));
}

}  // namespace
}  // namespace debugplane::rules_engine
