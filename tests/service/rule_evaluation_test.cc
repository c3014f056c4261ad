// Rule evaluation end to end: the real server reads real smdebug output (the
// fixtures, in place) and the rules reach the outcomes tests/data/README.md
// requires; a live writer shows detection as data lands.

#include <chrono>
#include <filesystem>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"
#include "tests/rules_engine/trial_writer.h"
#include "tests/service/fixture_outcomes.h"
#include "tests/service/server_process.h"

namespace debugplane {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::Context;
using ::debugplane::testing::FixtureOutcome;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::debugplane::testing::SmdebugFixtureOutcomes;
using ::testing::HasSubstr;

const fs::path kFixtures = fs::canonical(fs::path(DP_TEST_DATA_DIR));

v1::CreateTrainingJobRequest JobOn(const std::string& name, const fs::path& trial,
                                   const std::vector<std::string>& rules,
                                   const std::map<std::string, std::string>& parameters = {}) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
  request.mutable_debug_hook_config()->set_s3_output_path("file://" + trial.string());
  for (const std::string& rule_name : rules) {
    auto* rule = request.add_debug_rule_configurations();
    rule->set_rule_configuration_name(rule_name);
    rule->set_rule_evaluator_image(
        "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest");
    (*rule->mutable_rule_parameters())["rule_to_invoke"] = rule_name;
    for (const auto& [key, value] : parameters) (*rule->mutable_rule_parameters())[key] = value;
  }
  return request;
}

// Watches the job until the stream ends and returns the final rule statuses.
std::map<std::string, v1::DebugRuleEvaluationStatus> WaitForRules(
    v1::TrainingJobService::Stub& stub, const std::string& job, int seconds = 60) {
  v1::WatchTrainingJobRequest request;
  request.set_training_job_name(job);
  auto context = Context(seconds);
  auto reader = stub.WatchTrainingJob(context.get(), request);
  v1::WatchTrainingJobResponse event;
  std::map<std::string, v1::DebugRuleEvaluationStatus> statuses;
  while (reader->Read(&event)) {
    bool all_terminal = true;
    for (const auto& status : event.debug_rule_evaluation_statuses()) {
      statuses[status.rule_configuration_name()] = status;
      const auto s = status.rule_evaluation_status();
      all_terminal = all_terminal && s != v1::RuleEvaluationStatus::InProgress &&
                     s != v1::RuleEvaluationStatus::Stopping;
    }
    if (all_terminal) {
      context->TryCancel();
      break;
    }
  }
  return statuses;
}

class FixtureTest : public ::testing::Test {
 protected:
  ScopedTempDir dir_;
  ServerProcess server_{dir_.path(), {"--data-root", kFixtures.string()}};
};

TEST_F(FixtureTest, EveryFixtureReachesTheOutcomesItsReadmeRequires) {
  // tests/data/README.md, smdebug table.
  const std::vector<FixtureOutcome>& expectations = SmdebugFixtureOutcomes();
  auto stub = server_.Stub();
  for (const FixtureOutcome& e : expectations) {
    const std::string job = e.JobName("fixture-");
    v1::CreateTrainingJobRequest request = JobOn(job, kFixtures / "smdebug" / e.fixture, e.rules());
    for (auto& rule : *request.mutable_debug_rule_configurations()) {
      // tests/data/README.md: UnchangedTensor is judged on the weights.
      if (rule.rule_configuration_name() == "UnchangedTensor") {
        (*rule.mutable_rule_parameters())["collection_names"] = "weights";
      }
    }
    v1::CreateTrainingJobResponse created;
    grpc::Status status = stub->CreateTrainingJob(Context().get(), request, &created);
    ASSERT_TRUE(status.ok()) << e.fixture << ": " << status.error_message();
    auto statuses = WaitForRules(*stub, job);
    for (const std::string& rule : e.issues_found) {
      EXPECT_EQ(statuses[rule].rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound)
          << e.fixture << " " << rule << ": " << statuses[rule].status_details();
      EXPECT_THAT(statuses[rule].status_details(), HasSubstr("step")) << e.fixture << " " << rule;
    }
    for (const std::string& rule : e.no_issues_found) {
      EXPECT_EQ(statuses[rule].rule_evaluation_status(), v1::RuleEvaluationStatus::NoIssuesFound)
          << e.fixture << " " << rule << ": " << statuses[rule].status_details();
    }
  }
}

TEST_F(FixtureTest, NoDataGivesAnErrorThatSaysWhatWasReadAndWhatWasNeeded) {
  auto stub = server_.Stub();
  // The overfit run saved only `losses`: VanishingGradient has no gradients.
  v1::CreateTrainingJobResponse created;
  ASSERT_TRUE(stub->CreateTrainingJob(Context().get(),
                                      JobOn("no-gradients", kFixtures / "smdebug" / "overfit",
                                            {"VanishingGradient"}),
                                      &created)
                  .ok());
  auto statuses = WaitForRules(*stub, "no-gradients");
  const auto& status = statuses["VanishingGradient"];
  EXPECT_EQ(status.rule_evaluation_status(), v1::RuleEvaluationStatus::Error);
  EXPECT_THAT(status.status_details(), HasSubstr("gradient"));
  EXPECT_THAT(status.status_details(), HasSubstr("overfit"));  // The path it read.

  // A directory that does not exist: the error names it. It never ends by
  // itself (training may not have started), so stop the job.
  ASSERT_TRUE(stub->CreateTrainingJob(Context().get(),
                                      JobOn("missing-dir", kFixtures / "smdebug" / "no-such-run",
                                            {"ExplodingTensor"}),
                                      &created)
                  .ok());
}

TEST_F(FixtureTest, CreateWarnsOfMissingCollectionsAndRefusesBadRuleParameters) {
  auto stub = server_.Stub();
  v1::CreateTrainingJobRequest request =
      JobOn("warned", kFixtures / "smdebug" / "healthy", {"VanishingGradient"});
  request.mutable_debug_hook_config()->add_collection_configurations()->set_collection_name(
      "weights");
  v1::CreateTrainingJobResponse created;
  ASSERT_TRUE(stub->CreateTrainingJob(Context().get(), request, &created).ok());
  ASSERT_EQ(created.warnings_size(), 1);
  EXPECT_THAT(created.warnings(0), HasSubstr("'gradients'"));

  v1::CreateTrainingJobRequest bad = JobOn("bad-parameter", kFixtures / "smdebug" / "healthy",
                                           {"VanishingGradient"}, {{"threshold", "abc"}});
  grpc::Status refused = stub->CreateTrainingJob(Context().get(), bad, &created);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("DebugRuleConfigurations[0].RuleParameters"));
  EXPECT_THAT(refused.error_message(), HasSubstr("threshold"));
}

TEST(LiveEvaluationTest, ExplodingTensorIsFoundAsSoonAsTheNanStepLands) {
  ScopedTempDir data;
  ServerProcess server(data.path());
  auto stub = server.Stub();
  const fs::path trial = data.path() / "live-trial";
  rules_engine::testing::TrialWriter writer(trial.string());
  v1::CreateTrainingJobResponse created;
  ASSERT_TRUE(
      stub->CreateTrainingJob(Context().get(), JobOn("live", trial, {"ExplodingTensor"}), &created)
          .ok());
  for (int step = 0; step < 5; ++step) {
    writer.AddStep(step, rules_engine::Mode::kTrain, step,
                   {{"CrossEntropyLoss_output_0", {}, {0.7 - step * 0.01}}});
  }
  absl::SleepFor(absl::Milliseconds(300));
  v1::DescribeTrainingJobRequest describe;
  describe.set_training_job_name("live");
  v1::DescribeTrainingJobResponse job;
  ASSERT_TRUE(stub->DescribeTrainingJob(Context().get(), describe, &job).ok());
  EXPECT_EQ(job.debug_rule_evaluation_statuses(0).rule_evaluation_status(),
            v1::RuleEvaluationStatus::InProgress);

  v1::WatchTrainingJobRequest watch;
  watch.set_training_job_name("live");
  auto context = Context(30);
  auto reader = stub->WatchTrainingJob(context.get(), watch);
  v1::WatchTrainingJobResponse event;
  ASSERT_TRUE(reader->Read(&event));  // Current state.
  const absl::Time written = absl::Now();
  writer.AddStep(5, rules_engine::Mode::kTrain, 5,
                 {{"CrossEntropyLoss_output_0", {}, {std::numeric_limits<double>::quiet_NaN()}}});
  bool found = false;
  while (!found && reader->Read(&event)) {
    found = event.debug_rule_evaluation_statuses(0).rule_evaluation_status() ==
            v1::RuleEvaluationStatus::IssuesFound;
  }
  ASSERT_TRUE(found);
  EXPECT_THAT(event.debug_rule_evaluation_statuses(0).status_details(), HasSubstr("step 5"));
  // Loose bound for a loaded CI machine; the bench measures the real latency.
  EXPECT_LT(absl::Now() - written, absl::Seconds(5));
  context->TryCancel();
}

}  // namespace
}  // namespace debugplane
