// Rule actions and restarts end to end: the real server, a live trial, a
// loopback webhook, and kill -9 in the middle.

#include <chrono>
#include <filesystem>
#include <limits>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/core/test_util.h"
#include "tests/rules_engine/actions/fake_receivers.h"
#include "tests/rules_engine/trial_writer.h"
#include "tests/service/server_process.h"
#include "tests/service/training_job_calls.h"
#include "tests/support/wait_until.h"

namespace debugplane {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::CreateJob;
using ::debugplane::testing::DescribeJob;
using ::debugplane::testing::FakeHttpReceiver;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::debugplane::testing::WaitUntil;
using rules_engine::Mode;
using rules_engine::testing::TrialWriter;
using ::testing::HasSubstr;

v1::CreateTrainingJobRequest Job(const std::string& name, const fs::path& trial,
                                 const std::string& action_json) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
  request.mutable_debug_hook_config()->set_s3_output_path(trial.string());
  auto* rule = request.add_debug_rule_configurations();
  rule->set_rule_configuration_name("ExplodingTensor");
  rule->set_rule_evaluator_image("builtin");
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = "ExplodingTensor";
  if (!action_json.empty()) (*rule->mutable_rule_parameters())["action_json"] = action_json;
  return request;
}

// Polls Describe until `done(job)` holds (at most `seconds`).
template <typename Predicate>
v1::DescribeTrainingJobResponse WaitFor(ServerProcess& server, const std::string& name,
                                        Predicate done, int seconds = 30) {
  auto stub = server.Stub();
  v1::DescribeTrainingJobResponse job;
  const bool reached = WaitUntil(
      [&] {
        job = DescribeJob(*stub, name);
        return done(job);
      },
      absl::Seconds(seconds));
  if (!reached) ADD_FAILURE() << "condition not reached; last state: " << job.DebugString();
  return job;
}

void WriteHealthySteps(TrialWriter& writer, int from, int to) {
  for (int step = from; step < to; ++step) {
    writer.AddStep(step, Mode::kTrain, step, {{"CrossEntropyLoss_output_0", {}, {0.7}}});
  }
}

void WriteNanStep(TrialWriter& writer, int step) {
  writer.AddStep(step, Mode::kTrain, step,
                 {{"CrossEntropyLoss_output_0", {}, {std::numeric_limits<double>::quiet_NaN()}}});
}

TEST(RuleActionsEndToEndTest, StopAndNotifyOnceAcrossAKill9) {
  ScopedTempDir data;
  FakeHttpReceiver webhook;
  webhook.Script(std::vector<int>(1000, 503));  // Down until the restart.
  ServerProcess server(data.path(), {"--notify-webhook", webhook.url()});
  auto stub = server.Stub();
  const fs::path trial = data.path() / "trial";
  TrialWriter writer(trial.string());
  ASSERT_TRUE(CreateJob(*stub, Job("guarded", trial,
                                   R"([{"name": "stoptraining"},
                              {"name": "email", "endpoint": "ml-team@example.com"}])"))
                  .ok());
  WriteHealthySteps(writer, 0, 3);
  WriteNanStep(writer, 3);

  // The rule stops its job; the email is retried while the webhook fails.
  v1::DescribeTrainingJobResponse job = WaitFor(server, "guarded", [](const auto& job) {
    return job.training_job_status() == v1::TrainingJobStatus::Stopped &&
           job.rule_actions_size() == 2 && job.rule_actions(1).attempts() >= 2;
  });
  EXPECT_EQ(job.debug_rule_evaluation_statuses(0).rule_evaluation_status(),
            v1::RuleEvaluationStatus::IssuesFound);
  EXPECT_EQ(job.rule_actions(0).action(), "StopTraining");
  EXPECT_EQ(job.rule_actions(0).status(), v1::RuleActionStatus::Succeeded);
  EXPECT_EQ(job.rule_actions(1).status(), v1::RuleActionStatus::Pending);
  EXPECT_THAT(job.rule_actions(1).details(), HasSubstr("answered HTTP 503"));
  bool stop_reason = false;
  for (const auto& transition : job.secondary_status_transitions()) {
    stop_reason |=
        absl::StrContains(transition.status_message(), "Stopped by rule ExplodingTensor");
  }
  EXPECT_TRUE(stop_reason);

  server.Restart();  // kill -9, start again on the same database.
  const size_t failed_before = webhook.requests().size();
  webhook.Script({});  // The webhook is back.

  job = WaitFor(server, "guarded", [](const auto& job) {
    return job.rule_actions_size() == 2 &&
           job.rule_actions(1).status() != v1::RuleActionStatus::Pending;
  });
  EXPECT_EQ(job.rule_actions(1).status(), v1::RuleActionStatus::Succeeded)
      << job.rule_actions(1).details();
  EXPECT_EQ(job.rule_actions(0).status(), v1::RuleActionStatus::Succeeded);
  auto requests = webhook.requests();
  ASSERT_EQ(requests.size(), failed_before + 1);  // Exactly one accepted delivery.
  auto delivered = nlohmann::json::parse(requests.back().body);
  EXPECT_EQ(delivered["Endpoint"], "ml-team@example.com");
  EXPECT_EQ(delivered["TrainingJobName"], "guarded");
  EXPECT_THAT(delivered["StatusDetails"].get<std::string>(), HasSubstr("step 3"));

  // Restarting again triggers nothing again.
  server.Restart();
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(webhook.requests().size(), failed_before + 1);
  job = DescribeJob(*server.Stub(), "guarded");
  EXPECT_EQ(job.rule_actions_size(), 2);
  EXPECT_EQ(job.training_job_status(), v1::TrainingJobStatus::Stopped);
}

TEST(RuleActionsEndToEndTest, ProgressIsRecordedAndEvaluationResumesAfterAKill9) {
  ScopedTempDir data;
  ServerProcess server(data.path());
  auto stub = server.Stub();
  const fs::path trial = data.path() / "trial";
  TrialWriter writer(trial.string());
  ASSERT_TRUE(CreateJob(*stub, Job("resumed", trial, "")).ok());
  WriteHealthySteps(writer, 0, 10);
  WaitFor(server, "resumed", [](const auto& job) {
    return job.debug_rule_evaluation_statuses(0).has_last_evaluated_step() &&
           job.debug_rule_evaluation_statuses(0).last_evaluated_step() == 9;
  });

  server.Restart();
  auto job = DescribeJob(*server.Stub(), "resumed");
  EXPECT_EQ(job.debug_rule_evaluation_statuses(0).rule_evaluation_status(),
            v1::RuleEvaluationStatus::InProgress);
  EXPECT_EQ(job.debug_rule_evaluation_statuses(0).last_evaluated_step(), 9);

  WriteHealthySteps(writer, 10, 12);
  WriteNanStep(writer, 12);
  job = WaitFor(server, "resumed", [](const auto& job) {
    return job.debug_rule_evaluation_statuses(0).rule_evaluation_status() !=
           v1::RuleEvaluationStatus::InProgress;
  });
  EXPECT_EQ(job.debug_rule_evaluation_statuses(0).rule_evaluation_status(),
            v1::RuleEvaluationStatus::IssuesFound);
  EXPECT_THAT(job.debug_rule_evaluation_statuses(0).status_details(), HasSubstr("step 12"));
}

TEST(RuleActionsEndToEndTest, BadActionJsonIsRefusedNamingTheParameter) {
  ScopedTempDir data;
  ServerProcess server(data.path());
  grpc::Status refused = CreateJob(
      *server.Stub(),
      Job("bad-action", data.path() / "trial", R"({"name": "sms", "endpoint": "555-1234"})"));
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("DebugRuleConfigurations[0].RuleParameters.action_json"));
  EXPECT_THAT(refused.error_message(), HasSubstr("phone number"));
}

}  // namespace
}  // namespace debugplane
