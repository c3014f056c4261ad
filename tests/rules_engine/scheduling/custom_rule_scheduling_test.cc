// Custom rule evaluators scheduled for jobs: the scheduler starts the
// configured command with the trial and parameters in its environment,
// records its verdict, and kills it when the job stops.

#include <signal.h>
#include <sys/stat.h>

#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rules_engine/scheduling/evaluation_scheduler.h"
#include "tests/rules_engine/scheduling/scheduler_test_fixture.h"

namespace debugplane::rules_engine {
namespace {

using ::debugplane::testing::CallSync;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::WaitUntil;
using ::testing::HasSubstr;
using H = core::TrainingJobHandler;

class CustomRuleSchedulingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    core::TrainingJobManagerOptions options;
    options.validation.allowed_custom_evaluators = {"my-rule:latest", "unconfigured:latest"};
    auto manager = ::debugplane::testing::OpenTestManager(dir_.path(), options);
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *std::move(manager);

    script_ = dir_.path() / "rule.sh";
    std::ofstream(script_) << "#!/bin/sh\n"
                              "echo $$ > \"$DP_TRIAL_PATH/pid\"\n"
                              "echo \"job=$DP_TRAINING_JOB_NAME rule=$DP_RULE_CONFIGURATION_NAME "
                              "mode=$DP_RULE_PARAM_mode\"\n"
                              "case \"$DP_RULE_PARAM_mode\" in\n"
                              "  issues) echo \"loss diverged at step 7\"; exit 10 ;;\n"
                              "  fine) exit 0 ;;\n"
                              "  hang) sleep 1000 ;;\n"
                              "esac\n"
                              "exit 3\n";
    chmod(script_.c_str(), 0755);
    EvaluationSchedulerOptions scheduler_options;
    scheduler_options.data_roots.push_back(dir_.path());
    scheduler_options.custom_evaluators["my-rule:latest"] = {script_.string()};
    scheduler_ = std::make_unique<EvaluationScheduler>(manager_.get(), scheduler_options);
    scheduler_->Start();
  }
  void TearDown() override {
    scheduler_.reset();
    manager_.reset();
  }

  void CreateJob(const std::string& name, const std::string& image, const std::string& mode) {
    std::filesystem::create_directories(dir_.path() / name);
    v1::CreateTrainingJobRequest request = testing::NewJobRequest(name);
    request.mutable_debug_hook_config()->set_s3_output_path((dir_.path() / name).string());
    auto* rule = request.add_debug_rule_configurations();
    rule->set_rule_configuration_name("Custom");
    rule->set_rule_evaluator_image(image);
    (*rule->mutable_rule_parameters())["mode"] = mode;
    testing::CreateJobOrFail(*manager_, request);
  }

  v1::DebugRuleEvaluationStatus WaitForRule(const std::string& job) {
    return testing::WaitForTerminalDebugRule(*manager_, job, "Custom");
  }

  ScopedTempDir dir_;
  std::filesystem::path script_;
  std::unique_ptr<core::TrainingJobManager> manager_;
  std::unique_ptr<EvaluationScheduler> scheduler_;
};

TEST_F(CustomRuleSchedulingTest, ExitCodesBecomeStatusesWithTheEvaluatorsWords) {
  CreateJob("issues", "my-rule:latest", "issues");
  CreateJob("fine", "my-rule:latest", "fine");
  CreateJob("broken", "my-rule:latest", "other");
  auto issues = WaitForRule("issues");
  EXPECT_EQ(issues.rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound);
  EXPECT_THAT(issues.status_details(), HasSubstr("loss diverged at step 7"));
  EXPECT_THAT(issues.status_details(), HasSubstr("job=issues rule=Custom mode=issues"));
  EXPECT_EQ(WaitForRule("fine").rule_evaluation_status(), v1::RuleEvaluationStatus::NoIssuesFound);
  auto broken = WaitForRule("broken");
  EXPECT_EQ(broken.rule_evaluation_status(), v1::RuleEvaluationStatus::Error);
  EXPECT_THAT(broken.status_details(), HasSubstr("exited with code 3"));
}

TEST_F(CustomRuleSchedulingTest, AnImageWithoutACommandEndsInError) {
  CreateJob("unconfigured", "unconfigured:latest", "fine");
  auto status = WaitForRule("unconfigured");
  EXPECT_EQ(status.rule_evaluation_status(), v1::RuleEvaluationStatus::Error);
  EXPECT_THAT(status.status_details(), HasSubstr("--allow-evaluator"));
}

TEST_F(CustomRuleSchedulingTest, StoppingTheJobKillsItsEvaluator) {
  CreateJob("hangs", "my-rule:latest", "hang");
  const auto pid_file = dir_.path() / "hangs" / "pid";
  pid_t pid = 0;
  WaitUntil([&] {
    std::ifstream in(pid_file);
    std::string text;
    if (in >> text) (void)absl::SimpleAtoi(text, &pid);
    return pid > 0;
  });
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, 0), 0);
  v1::StopTrainingJobRequest stop;
  stop.set_training_job_name("hangs");
  ASSERT_TRUE(CallSync<v1::StopTrainingJobResponse>(*manager_, &H::StopTrainingJob, stop).ok());
  EXPECT_EQ(WaitForRule("hangs").rule_evaluation_status(), v1::RuleEvaluationStatus::Stopped);
  EXPECT_TRUE(WaitUntil([&] { return kill(pid, 0) != 0; })) << "evaluator " << pid << " still runs";
}

}  // namespace
}  // namespace debugplane::rules_engine
