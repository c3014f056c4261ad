// The agent uploads an s3:// job's output end to end (issue 11): the real
// server, the real agent running dp_fake_training, and a real S3-compatible
// server (moto's, on loopback: tests/objectstore/s3_test_server.h). The
// training writes locally, the agent uploads each file as it is complete,
// the server reads the trial from the bucket, and ExplodingTensor's
// IssuesFound stops the training through its stoptraining action. Server
// and agent are configured as a user configures the AWS tools
// (AWS_ENDPOINT_URL_S3, AWS_ACCESS_KEY_ID, ...); they share no directory.

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "objectstore/s3_object_store.h"
#include "tests/core/test_util.h"
#include "tests/objectstore/s3_test_server.h"
#include "tests/service/agent_process.h"
#include "tests/service/server_process.h"
#include "tests/service/training_job_calls.h"

namespace debugplane {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::AgentProcess;
using ::debugplane::testing::CreateJob;
using ::debugplane::testing::DescribeJob;
using ::debugplane::testing::S3TestServer;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::testing::HasSubstr;

constexpr char kBucket[] = "agent-output";

// The AWS variables of this process (inherited by the server and the
// agent) set to `values`, the rest of the AWS configuration cleared (a
// developer's ~/.aws must not leak in); restored when destroyed.
class ScopedAwsEnvironment {
 public:
  explicit ScopedAwsEnvironment(std::map<std::string, std::string> values) {
    for (const char* name :
         {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ACCESS_KEY_ID",
          "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_CA_BUNDLE",
          "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"}) {
      const char* old = getenv(name);
      saved_[name] = old == nullptr ? std::nullopt : std::optional<std::string>(old);
      unsetenv(name);
    }
    for (const auto& [name, value] : values) setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedAwsEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value.has_value()) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

class AgentUploadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<S3TestServer>> s3 = S3TestServer::Start({.buckets = {kBucket}});
    ASSERT_TRUE(s3.ok()) << s3.status();
    s3_ = *std::move(s3);
    env_ = std::make_unique<ScopedAwsEnvironment>(std::map<std::string, std::string>{
        {"AWS_ENDPOINT_URL_S3", s3_->endpoint()},
        {"AWS_REGION", "us-east-1"},
        {"AWS_ACCESS_KEY_ID", s3_->access_key_id()},
        {"AWS_SECRET_ACCESS_KEY", s3_->secret_access_key()},
        {"AWS_SHARED_CREDENTIALS_FILE", (dir_.path() / "no-credentials").string()},
        {"AWS_CONFIG_FILE", (dir_.path() / "no-config").string()},
    });
    server_ = std::make_unique<ServerProcess>(dir_.path() / "server");
    objectstore::S3ObjectStore::Options options;
    options.config = s3_->Config();
    options.bucket = kBucket;
    absl::StatusOr<std::shared_ptr<objectstore::S3ObjectStore>> store =
        objectstore::S3ObjectStore::Create(options);
    ASSERT_TRUE(store.ok()) << store.status();
    bucket_ = *store;
  }
  void TearDown() override {
    server_.reset();
    env_.reset();
  }

  v1::CreateTrainingJobRequest Job(const std::string& name, const std::string& action_json) {
    v1::CreateTrainingJobRequest request;
    request.set_training_job_name(name);
    request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
    request.mutable_output_data_config()->set_s3_output_path(
        absl::StrCat("s3://", kBucket, "/", name));
    request.mutable_debug_hook_config()->set_s3_output_path(
        absl::StrCat("s3://", kBucket, "/", name, "/debug-output"));
    request.mutable_debug_hook_config()->add_collection_configurations()->set_collection_name(
        "losses");
    request.mutable_profiler_config()->set_s3_output_path(
        absl::StrCat("s3://", kBucket, "/", name, "/profiler-output"));
    request.mutable_profiler_config()->set_profiling_interval_in_milliseconds(100);
    auto* rule = request.add_debug_rule_configurations();
    rule->set_rule_configuration_name("ExplodingTensor");
    rule->set_rule_evaluator_image("builtin");
    (*rule->mutable_rule_parameters())["rule_to_invoke"] = "ExplodingTensor";
    (*rule->mutable_rule_parameters())["action_json"] = action_json;
    return request;
  }

  // The keys under `prefix` in the bucket.
  std::vector<std::string> Keys(const std::string& prefix) {
    objectstore::ListOptions options;
    options.prefix = prefix;
    std::vector<std::string> keys;
    while (true) {
      absl::StatusOr<objectstore::ListResult> listed = bucket_->List(options);
      EXPECT_TRUE(listed.ok()) << listed.status();
      if (!listed.ok()) return keys;
      for (const objectstore::ObjectEntry& entry : listed->objects) keys.push_back(entry.key);
      if (!listed->truncated) return keys;
      options.start_after = listed->next_start_after;
    }
  }

  ScopedTempDir dir_;
  std::unique_ptr<S3TestServer> s3_;
  std::unique_ptr<ScopedAwsEnvironment> env_;
  std::unique_ptr<ServerProcess> server_;
  std::shared_ptr<objectstore::S3ObjectStore> bucket_;
};

TEST_F(AgentUploadTest, UploadsWhileTrainingWritesAndTheRuleStopsTheTraining) {
  const std::string job = "uploaded";
  grpc::Status created = CreateJob(*server_->Stub(), Job(job, R"({"name": "stoptraining"})"));
  ASSERT_TRUE(created.ok()) << created.error_message();
  // The agent's own directories (TMPDIR) are not the server's.
  const fs::path agent_dir = dir_.path() / "agent-host";
  fs::create_directories(agent_dir / "tmp");
  AgentProcess agent(
      {"--server", server_->address(), "--job", job, "--stop-grace", "1", "--upload-wait", "30"},
      {DP_FAKE_TRAINING_BINARY, "--steps", "100000", "--step-ms", "20", "--nan-at", "10",
       "--ignore-term"},
      dir_.path() / "agent.log", agent_dir, {{"TMPDIR", (agent_dir / "tmp").string()}});
  EXPECT_EQ(agent.Wait(absl::Seconds(90)), 128 + SIGKILL) << agent.log();
  const v1::DescribeTrainingJobResponse described = DescribeJob(*server_->Stub(), job);
  EXPECT_EQ(described.training_job_status(), v1::TrainingJobStatus::Stopped);
  ASSERT_EQ(described.debug_rule_evaluation_statuses_size(), 1);
  EXPECT_EQ(described.debug_rule_evaluation_statuses(0).rule_evaluation_status(),
            v1::RuleEvaluationStatus::IssuesFound)
      << described.debug_rule_evaluation_statuses(0).status_details();
  EXPECT_THAT(described.debug_rule_evaluation_statuses(0).status_details(), HasSubstr("step"));
  const std::string log = agent.log();
  EXPECT_THAT(log, HasSubstr(absl::StrCat("to s3://", kBucket, "/", job, "/debug-output")));
  EXPECT_THAT(log, HasSubstr("Stopped by rule ExplodingTensor"));
  EXPECT_THAT(log, HasSubstr("files ("));  // "uploaded N files (B bytes)" at the end

  // Everything the training and the sampler wrote went up: the local trial
  // and the bucket hold the same files.
  const fs::path tensors = agent_dir / "tmp" / "debugplane-agent" / job / "tensors";
  std::vector<std::string> local;
  for (const auto& entry : fs::recursive_directory_iterator(tensors)) {
    if (entry.is_regular_file()) {
      local.push_back(
          absl::StrCat(job, "/debug-output/", fs::relative(entry.path(), tensors).string()));
    }
  }
  std::sort(local.begin(), local.end());
  ASSERT_FALSE(local.empty());
  EXPECT_EQ(Keys(absl::StrCat(job, "/debug-output/")), local);
  std::vector<std::string> metrics = Keys(absl::StrCat(job, "/profiler-output/system/"));
  EXPECT_FALSE(metrics.empty()) << "no system metrics were uploaded; agent log:\n" << log;
}

TEST_F(AgentUploadTest, AMissingBucketIsRefusedBeforeTheCommandStarts) {
  v1::CreateTrainingJobRequest request = Job("nobucket", R"({"name": "stoptraining"})");
  request.mutable_debug_hook_config()->set_s3_output_path("s3://no-such-bucket/x");
  grpc::Status created = CreateJob(*server_->Stub(), request);
  ASSERT_TRUE(created.ok()) << created.error_message();
  const fs::path agent_dir = dir_.path() / "agent-host";
  fs::create_directories(agent_dir / "tmp");
  const fs::path marker = dir_.path() / "started";
  AgentProcess agent({"--server", server_->address(), "--job", "nobucket"},
                     {"/bin/sh", "-c", absl::StrCat("touch ", marker.string())},
                     dir_.path() / "agent.log", agent_dir,
                     {{"TMPDIR", (agent_dir / "tmp").string()}});
  EXPECT_EQ(agent.Wait(absl::Seconds(60)), 2) << agent.log();
  EXPECT_THAT(agent.log(), HasSubstr("DebugHookConfig.S3OutputPath s3://no-such-bucket/x"));
  EXPECT_THAT(agent.log(), HasSubstr("bucket 'no-such-bucket' does not exist"));
  EXPECT_FALSE(fs::exists(marker)) << "the command started";
}

TEST_F(AgentUploadTest, ExitWaitsForUploadsOnlyUpToTheBoundWhenTheStoreIsAway) {
  const std::string job = "storeaway";
  grpc::Status created =
      CreateJob(*server_->Stub(), Job(job, R"({"name": "email", "endpoint": "a@example.com"})"));
  ASSERT_TRUE(created.ok()) << created.error_message();
  const fs::path agent_dir = dir_.path() / "agent-host";
  fs::create_directories(agent_dir / "tmp");
  // The agent's store: a loopback port where nothing listens.
  AgentProcess agent(
      {"--server", server_->address(), "--job", job, "--upload-wait", "2"},
      {DP_FAKE_TRAINING_BINARY, "--steps", "5", "--step-ms", "10"}, dir_.path() / "agent.log",
      agent_dir,
      {{"TMPDIR", (agent_dir / "tmp").string()}, {"AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9"}});
  const absl::Time start = absl::Now();
  EXPECT_EQ(agent.Wait(absl::Seconds(60)), 0) << agent.log();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  const std::string log = agent.log();
  EXPECT_THAT(log, HasSubstr("files wait on disk"));
  EXPECT_THAT(log, HasSubstr("were not uploaded within 2s"));
  EXPECT_THAT(log, HasSubstr("cannot reach the S3 endpoint http://127.0.0.1:9"));
  // The end is reported all the same.
  EXPECT_EQ(DescribeJob(*server_->Stub(), job).training_job_status(),
            v1::TrainingJobStatus::Completed);
  // The files are still on disk.
  EXPECT_TRUE(
      fs::exists(agent_dir / "tmp" / "debugplane-agent" / job / "tensors" / "training_job_end.ts"));
}

}  // namespace
}  // namespace debugplane
