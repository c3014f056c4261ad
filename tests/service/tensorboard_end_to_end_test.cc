// TensorBoard logs as a job's trial end to end (issue 24): the real server,
// the real agent and a training process that logs to TensorBoard as
// PyTorch's SummaryWriter does (tests/service/tensorboard_training.py, a
// stdlib writer of TFRecord event records, CRC32C included). The agent
// points it at the job's TensorBoard directory (DP_TENSORBOARD_DIR,
// TENSORBOARD_LOGGING_DIR); the server reads the event file as it grows,
// locally and from a real S3-compatible server (moto's, on loopback) the
// agent uploads it to; ExplodingTensor's stoptraining action ends the
// training at its NaN loss.

#include <signal.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"
#include "tests/objectstore/s3_test_server.h"
#include "tests/service/agent_process.h"
#include "tests/service/aws_environment.h"
#include "tests/service/server_process.h"
#include "tests/service/training_job_calls.h"

namespace debugplane {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::AgentProcess;
using ::debugplane::testing::AwsEnvironment;
using ::debugplane::testing::Context;
using ::debugplane::testing::DescribeJob;
using ::debugplane::testing::S3TestServer;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kBucket[] = "tensorboard-output";

// The training script and its arguments: a NaN loss from step 10 on, and
// steps until it is stopped.
std::vector<std::string> TrainingCommand() {
  return {"/usr/bin/python3", absl::StrCat(DP_SOURCE_DIR, "/tests/service/tensorboard_training.py"),
          "--steps", "100000", "--step-ms", "20", "--nan-at", "10"};
}

// A job whose only trial is its TensorBoard logs at `tensorboard_uri`, with
// ExplodingTensor stopping it, and `more_rules` (built-in, by name).
v1::CreateTrainingJobRequest TensorBoardJob(const std::string& name,
                                            const std::string& tensorboard_uri,
                                            const std::vector<std::string>& more_rules = {}) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
  request.mutable_tensor_board_output_config()->set_s3_output_path(tensorboard_uri);
  auto* rule = request.add_debug_rule_configurations();
  rule->set_rule_configuration_name("ExplodingTensor");
  rule->set_rule_evaluator_image("builtin");
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = "ExplodingTensor";
  (*rule->mutable_rule_parameters())["action_json"] = R"({"name": "stoptraining"})";
  for (const std::string& name : more_rules) {
    auto* more = request.add_debug_rule_configurations();
    more->set_rule_configuration_name(name);
    more->set_rule_evaluator_image("builtin");
    (*more->mutable_rule_parameters())["rule_to_invoke"] = name;
  }
  return request;
}

// The job ended by its rule: Stopped, ExplodingTensor IssuesFound at the
// NaN loss, the training ended by SIGTERM.
void ExpectStoppedAtTheNan(v1::TrainingJobService::Stub& stub, const std::string& job,
                           AgentProcess& agent) {
  EXPECT_EQ(agent.Wait(absl::Seconds(90)), 128 + SIGTERM) << agent.log();
  const v1::DescribeTrainingJobResponse described = DescribeJob(stub, job);
  EXPECT_EQ(described.training_job_status(), v1::TrainingJobStatus::Stopped);
  ASSERT_GE(described.debug_rule_evaluation_statuses_size(), 1);
  const v1::DebugRuleEvaluationStatus& exploding = described.debug_rule_evaluation_statuses(0);
  EXPECT_EQ(exploding.rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound)
      << exploding.status_details();
  EXPECT_THAT(exploding.status_details(), AllOf(HasSubstr("train/loss"), HasSubstr("10")));
  EXPECT_THAT(agent.log(), HasSubstr("Stopped by rule ExplodingTensor"));
}

class TensorBoardEndToEndTest : public ::testing::Test {
 protected:
  ScopedTempDir data_;
  ServerProcess server_{data_.path()};
};

TEST_F(TensorBoardEndToEndTest, CreateWarnsOfTheRulesTensorBoardLogsCannotCarry) {
  v1::CreateTrainingJobResponse created;
  grpc::Status status = server_.Stub()->CreateTrainingJob(
      Context().get(),
      TensorBoardJob("warned", (data_.path() / "warned" / "tb").string(),
                     {"Overfit", "DeadRelu"}),
      &created);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(created.warnings_size(), 1);
  EXPECT_THAT(created.warnings(0), HasSubstr("DebugRuleConfigurations[2] (DeadRelu, DeadRelu)"));

  v1::CreateTrainingJobRequest no_path = TensorBoardJob("no-path", "");
  status = server_.Stub()->CreateTrainingJob(Context().get(), no_path, &created);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("TensorBoardOutputConfig.S3OutputPath"));
}

TEST_F(TensorBoardEndToEndTest, ANanLossLoggedLocallyStopsTheTrainingThroughTheRule) {
  const std::string job = "tb-local";
  const fs::path logs = data_.path() / job / "tensorboard";
  grpc::Status created = testing::CreateJob(*server_.Stub(), TensorBoardJob(job, logs.string()));
  ASSERT_TRUE(created.ok()) << created.error_message();
  AgentProcess agent({"--server", server_.address(), "--job", job, "--config-dir",
                      (data_.path() / job / "config").string(), "--allow-write",
                      data_.path().string(), "--stop-grace", "5"},
                     TrainingCommand(), data_.path() / "agent.log");
  ExpectStoppedAtTheNan(*server_.Stub(), job, agent);
  // The script wrote where the agent pointed it: the job's directory.
  bool found = false;
  for (const auto& entry : fs::recursive_directory_iterator(logs)) {
    found = found || absl::StartsWith(entry.path().filename().string(), "events.out.tfevents.");
  }
  EXPECT_TRUE(found) << "no event file under " << logs << "; agent log:\n" << agent.log();
}

TEST(TensorBoardS3EndToEndTest, ANanLossUploadedToS3StopsTheTrainingThroughTheRule) {
  ScopedTempDir dir;
  absl::StatusOr<std::unique_ptr<S3TestServer>> s3 = S3TestServer::Start({.buckets = {kBucket}});
  ASSERT_TRUE(s3.ok()) << s3.status();
  AwsEnvironment aws(dir.path(), (*s3)->endpoint(), (*s3)->access_key_id(),
                     (*s3)->secret_access_key());
  ServerProcess server(dir.path() / "server");
  const std::string job = "tb-s3";
  v1::CreateTrainingJobRequest request =
      TensorBoardJob(job, absl::StrCat("s3://", kBucket, "/", job, "/tb"));
  // The default profiler output goes under OutputDataConfig: in the bucket.
  request.mutable_output_data_config()->set_s3_output_path(
      absl::StrCat("s3://", kBucket, "/", job, "/out"));
  grpc::Status created = testing::CreateJob(*server.Stub(), request);
  ASSERT_TRUE(created.ok()) << created.error_message();
  // The agent's host shares no directory with the server.
  const fs::path agent_dir = dir.path() / "agent-host";
  fs::create_directories(agent_dir / "tmp");
  AgentProcess agent({"--server", server.address(), "--job", job, "--stop-grace", "5",
                      "--upload-wait", "30"},
                     TrainingCommand(), dir.path() / "agent.log", agent_dir,
                     {{"TMPDIR", (agent_dir / "tmp").string()}});
  ExpectStoppedAtTheNan(*server.Stub(), job, agent);
  EXPECT_THAT(agent.log(), AllOf(HasSubstr(absl::StrCat("to s3://", kBucket, "/", job, "/tb")),
                                 HasSubstr("TensorBoardOutputConfig.S3OutputPath")));
}

}  // namespace
}  // namespace debugplane
