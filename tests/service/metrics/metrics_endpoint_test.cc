// GET /metrics on a complete in-process server (ServerApp): access with and
// without --credentials, and every recording point reached through the
// server's real paths (gRPC calls, the database, rule evaluation on a live
// trial, an action, watch streams, HTTP requests).

#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "service/server_app.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/rules_engine/trial_writer.h"
#include "tests/service/auth/auth_test_util.h"
#include "tests/service/metrics/metrics_http.h"
#include "tests/service/server_process.h"
#include "tests/support/wait_until.h"

namespace debugplane::service {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::Context;
using ::debugplane::testing::HttpGet;
using ::debugplane::testing::HttpReply;
using ::debugplane::testing::Sample;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::WaitUntil;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Optional;

constexpr char kInProgress[] = "debugplane_jobs{status=\"InProgress\"}";

ServerConfig Config(const fs::path& data_dir, const std::string& credentials = "") {
  ServerConfig config;
  config.grpc.listen_address = "127.0.0.1:0";
  config.http_listen_address = "127.0.0.1:0";
  config.data_dir = data_dir.string();
  config.credentials_file = credentials;
  config.shutdown_grace = absl::ZeroDuration();
  return config;
}

v1::CreateTrainingJobRequest Job(const std::string& name, const fs::path& trial,
                                 const std::string& rule = "",
                                 const std::string& action_json = "") {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
  request.mutable_debug_hook_config()->set_s3_output_path("file://" + trial.string());
  if (!rule.empty()) {
    auto* config = request.add_debug_rule_configurations();
    config->set_rule_configuration_name(rule);
    config->set_rule_evaluator_image(
        "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest");
    (*config->mutable_rule_parameters())["rule_to_invoke"] = rule;
    if (!action_json.empty()) (*config->mutable_rule_parameters())["action_json"] = action_json;
  }
  return request;
}

class MetricsEndpointTest : public ::testing::Test {
 protected:
  void Start(const std::string& credentials = "") {
    auto app = ServerApp::Start(Config(dir_.path(), credentials));
    ASSERT_TRUE(app.ok()) << app.status();
    app_ = *std::move(app);
    stub_ = v1::TrainingJobService::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", app_->port()), grpc::InsecureChannelCredentials()));
  }
  std::string Url() const {
    return absl::StrCat("http://127.0.0.1:", app_->http_port(), "/metrics");
  }
  // A scrape that must succeed; its body.
  std::string Scrape(const std::vector<std::string>& headers = {}) {
    HttpReply reply = HttpGet(Url(), headers);
    EXPECT_EQ(reply.status, 200) << reply.body;
    return reply.body;
  }
  std::unique_ptr<grpc::ClientContext> Admin() {
    return admin_token_.empty() ? Context() : testing::TokenContext(admin_token_);
  }
  void Create(const v1::CreateTrainingJobRequest& request) {
    v1::CreateTrainingJobResponse created;
    grpc::Status status = stub_->CreateTrainingJob(Admin().get(), request, &created);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  ScopedTempDir dir_;
  std::unique_ptr<ServerApp> app_;
  std::unique_ptr<v1::TrainingJobService::Stub> stub_;
  std::string admin_token_;
};

TEST_F(MetricsEndpointTest, OpenWithoutCredentialsAndCountsJobsCallsAndWrites) {
  Start();
  HttpReply first = HttpGet(Url());
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_THAT(first.headers, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(first.body, HasSubstr("# TYPE debugplane_jobs gauge\n"));
  // Every status is exposed, 0 included.
  EXPECT_THAT(Sample(first.body, kInProgress), Optional(0.0));
  EXPECT_THAT(Sample(first.body, "debugplane_jobs{status=\"Stopped\"}"), Optional(0.0));
  EXPECT_THAT(Sample(first.body, "debugplane_rule_evaluations{status=\"IssuesFound\"}"),
              Optional(0.0));
  // The start-up scan of the database.
  EXPECT_THAT(Sample(first.body, "debugplane_database_duration_seconds_count{operation=\"read\"}"),
              Optional(1.0));

  for (const std::string name : {"a", "b", "c"}) Create(Job(name, dir_.path() / name));
  v1::StopTrainingJobRequest stop;
  stop.set_training_job_name("c");
  v1::StopTrainingJobResponse stopped;
  ASSERT_TRUE(stub_->StopTrainingJob(Admin().get(), stop, &stopped).ok());
  v1::DescribeTrainingJobRequest missing;
  missing.set_training_job_name("no-such-job");
  v1::DescribeTrainingJobResponse described;
  EXPECT_FALSE(stub_->DescribeTrainingJob(Admin().get(), missing, &described).ok());

  const std::string text = Scrape();
  EXPECT_THAT(Sample(text, kInProgress), Optional(2.0));
  const double stopping = Sample(text, "debugplane_jobs{status=\"Stopping\"}").value_or(-1) +
                          Sample(text, "debugplane_jobs{status=\"Stopped\"}").value_or(-1);
  EXPECT_EQ(stopping, 1.0) << text;
  EXPECT_THAT(Sample(text,
                     "debugplane_grpc_requests_total{code=\"OK\",method=\"/"
                     "debugplane.v1.TrainingJobService/CreateTrainingJob\"}"),
              Optional(3.0));
  EXPECT_THAT(Sample(text,
                     "debugplane_grpc_requests_total{code=\"NOT_FOUND\",method=\"/"
                     "debugplane.v1.TrainingJobService/DescribeTrainingJob\"}"),
              Optional(1.0));
  // Four changes committed (three creations, a stop), in one write or more.
  EXPECT_GE(
      Sample(text, "debugplane_database_duration_seconds_count{operation=\"write\"}").value_or(0),
      1.0);
  EXPECT_GT(
      Sample(text, "debugplane_database_duration_seconds_sum{operation=\"write\"}").value_or(0),
      0.0);
  // The first scrape was counted once its reply was sent.
  EXPECT_THAT(Sample(text, "debugplane_http_requests_total{code=\"200\",route=\"/metrics\"}"),
              Optional(1.0));
}

TEST_F(MetricsEndpointTest, WithCredentialsNeedsANonAgentBearerToken) {
  const fs::path credentials = dir_.path() / "credentials";
  testing::WriteCredentials(credentials,
                            "admin ADMIN admin-secret\n"
                            "reader READER reader-secret\n"
                            "agent AGENT agent-secret\n");
  admin_token_ = "ADMIN:admin-secret";
  Start(credentials.string());

  HttpReply none = HttpGet(Url());
  EXPECT_EQ(none.status, 401);
  EXPECT_THAT(none.headers, HasSubstr("WWW-Authenticate: Bearer"));
  EXPECT_THAT(none.body, HasSubstr("no credentials"));
  EXPECT_THAT(none.body, Not(HasSubstr("debugplane_jobs")));

  HttpReply wrong = HttpGet(Url(), {"Authorization: Bearer READER:guessed-secret"});
  EXPECT_EQ(wrong.status, 401);
  EXPECT_THAT(wrong.body, HasSubstr("wrong secret for access key 'READER'"));
  EXPECT_THAT(wrong.body, Not(HasSubstr("guessed-secret")));
  EXPECT_THAT(wrong.body, Not(HasSubstr("reader-secret")));
  EXPECT_THAT(wrong.body, Not(HasSubstr("debugplane_jobs")));

  HttpReply unknown = HttpGet(Url(), {"Authorization: Bearer NOBODY:x-secret"});
  EXPECT_EQ(unknown.status, 401);
  EXPECT_THAT(unknown.body, Not(HasSubstr("x-secret")));

  HttpReply malformed = HttpGet(Url(), {"Authorization: Basic UkVBREVSOnJlYWRlci1zZWNyZXQ="});
  EXPECT_EQ(malformed.status, 401);

  HttpReply agent = HttpGet(Url(), {"Authorization: Bearer AGENT:agent-secret"});
  EXPECT_EQ(agent.status, 403);
  EXPECT_THAT(agent.body, HasSubstr("role agent"));
  EXPECT_THAT(agent.body, Not(HasSubstr("agent-secret")));

  Create(Job("secret-job", dir_.path() / "t"));
  for (const std::string token : {"READER:reader-secret", "ADMIN:admin-secret"}) {
    const std::string text = Scrape({"Authorization: Bearer " + token});
    EXPECT_THAT(Sample(text, kInProgress), Optional(1.0));
    // Nothing of the credentials or the jobs' names is exposed.
    for (const char* hidden : {"reader-secret", "admin-secret", "READER", "ADMIN", "secret-job"}) {
      EXPECT_THAT(text, Not(HasSubstr(hidden)));
    }
    EXPECT_THAT(text, HasSubstr("debugplane_http_requests_total{code=\"401\",route=\"/metrics\"}"));
  }
}

TEST_F(MetricsEndpointTest, RuleEvaluationActionsAndObjectStoreAreRecorded) {
  Start();
  const fs::path trial = dir_.path() / "live";
  rules_engine::testing::TrialWriter writer(trial.string());
  Create(Job("live", trial, "ExplodingTensor", R"({"name": "stoptraining"})"));
  for (int step = 0; step < 5; ++step) {
    writer.AddStep(step, rules_engine::Mode::kTrain, step,
                   {{"CrossEntropyLoss_output_0", {}, {0.7 - step * 0.01}}});
  }
  writer.AddStep(5, rules_engine::Mode::kTrain, 5,
                 {{"CrossEntropyLoss_output_0", {}, {std::numeric_limits<double>::quiet_NaN()}}});

  std::string text;
  ASSERT_TRUE(WaitUntil([&] {
    text = Scrape();
    // Pending until its outcome is committed and the dispatcher forgets it.
    return Sample(text,
                  "debugplane_rule_actions_total{outcome=\"Succeeded\",type=\"StopTraining\"}")
                   .value_or(0) == 1.0 &&
           Sample(text, "debugplane_outbox_pending_actions") == 0.0;
  })) << text;
  EXPECT_THAT(Sample(text, "debugplane_rule_evaluations{status=\"IssuesFound\"}"), Optional(1.0));
  // One detection: from the NaN step's index file to IssuesFound committed.
  EXPECT_THAT(Sample(text, "debugplane_detection_latency_seconds_count"), Optional(1.0));
  EXPECT_THAT(Sample(text, "debugplane_detection_latency_seconds_bucket{le=\"30\"}"),
              Optional(1.0));
  // Each of the 6 steps at least once (an evaluation may replay them).
  EXPECT_GE(Sample(text, "debugplane_steps_read_total").value_or(0), 6.0);
  EXPECT_GT(Sample(text, "debugplane_read_bytes_total{source=\"tensors\"}").value_or(0), 0);
  EXPECT_GT(Sample(text, "debugplane_evaluation_lag_steps_count").value_or(0), 0);
  EXPECT_GT(Sample(text,
                   "debugplane_object_store_requests_total{operation=\"list\","
                   "store=\"local\"}")
                .value_or(0),
            0);
  EXPECT_GT(Sample(text,
                   "debugplane_object_store_requests_total{operation=\"read\","
                   "store=\"local\"}")
                .value_or(0),
            0);
}

TEST_F(MetricsEndpointTest, WatchStreamsOpenFollowTheStreams) {
  Start();
  Create(Job("watched", dir_.path() / "w"));
  v1::WatchTrainingJobRequest request;
  request.set_training_job_name("watched");
  auto context = Context(30);
  auto reader = stub_->WatchTrainingJob(context.get(), request);
  v1::WatchTrainingJobResponse event;
  ASSERT_TRUE(reader->Read(&event));  // Registered: the current state came.
  const std::string series = "debugplane_watch_streams_open{kind=\"client\"}";
  EXPECT_THAT(Sample(Scrape(), series), Optional(1.0));
  EXPECT_THAT(Sample(Scrape(), "debugplane_watch_streams_open{kind=\"agent\"}"), Optional(0.0));
  context->TryCancel();
  while (reader->Read(&event)) {
  }
  std::string text;
  EXPECT_TRUE(WaitUntil([&] {
    text = Scrape();
    return Sample(text, series) == 0.0;
  })) << text;
}

}  // namespace
}  // namespace debugplane::service
