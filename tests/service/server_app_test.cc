// The server's flags and its assembly, in-process: no binary is forked.

#include "service/server_app.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "service/server_flags.h"
#include "tests/core/scoped_temp_dir.h"

namespace debugplane::service {
namespace {

using ::debugplane::testing::ScopedTempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;

struct Parsed {
  ParsedServerFlags flags;
  std::string out;
  std::string err;
};

Parsed Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "debugplane-server");
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  std::ostringstream out;
  std::ostringstream err;
  Parsed parsed{ParseServerFlags(static_cast<int>(argv.size()), argv.data(), out, err), "", ""};
  parsed.out = out.str();
  parsed.err = err.str();
  return parsed;
}

TEST(ServerFlagsTest, HelpListsTheFlagsAndExitsZero) {
  Parsed parsed = Parse({"--help"});
  EXPECT_FALSE(parsed.flags.config.has_value());
  EXPECT_EQ(parsed.flags.exit_code, 0);
  EXPECT_THAT(parsed.out, AllOf(HasSubstr("--data-root"), HasSubstr("--watch-buffer-bytes"),
                                HasSubstr("--stop-confirm-timeout")));
}

TEST(ServerFlagsTest, AnUnknownFlagOrABadValueIsAnErrorNamingIt) {
  Parsed unknown = Parse({"--no-such-flag"});
  EXPECT_FALSE(unknown.flags.config.has_value());
  EXPECT_NE(unknown.flags.exit_code, 0);
  EXPECT_THAT(unknown.err, HasSubstr("--no-such-flag"));

  Parsed bad = Parse({"--rule-workers", "0"});
  EXPECT_NE(bad.flags.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("--rule-workers"));
}

TEST(ServerFlagsTest, FlagsAndAConfigFileFillTheConfiguration) {
  ScopedTempDir dir;
  const std::string file = (dir.path() / "server.toml").string();
  std::ofstream(file) << "listen = \"127.0.0.1:0\"\n"
                      << "data-root = [\"/srv/a\", \"/srv/b\"]\n"
                      << "stop-confirm-timeout = 30\n";
  Parsed parsed = Parse({"--config", file, "--data-dir", dir.path().string(), "--shutdown-grace",
                         "2.5", "--notify-webhook", "http://127.0.0.1:9/hook"});
  ASSERT_TRUE(parsed.flags.config.has_value()) << parsed.err;
  const ServerConfig& config = *parsed.flags.config;
  EXPECT_EQ(config.grpc.listen_address, "127.0.0.1:0");
  EXPECT_EQ(config.data_dir, dir.path().string());
  EXPECT_THAT(config.data_roots, ::testing::ElementsAre("/srv/a", "/srv/b"));
  EXPECT_EQ(config.manager.stop_wait.for_agent, absl::Seconds(30));
  EXPECT_EQ(config.shutdown_grace, absl::Milliseconds(2500));
  EXPECT_THAT(config.notify_webhooks, ::testing::ElementsAre("http://127.0.0.1:9/hook"));
}

TEST(ServerFlagsTest, ObjectStorageFlagsOverrideOnlyWhatIsGiven) {
  ScopedTempDir dir;
  const std::string file = (dir.path() / "server.toml").string();
  std::ofstream(file) << "s3-endpoint = \"http://127.0.0.1:9000\"\n"
                      << "s3-addressing = \"path\"\n";
  Parsed parsed = Parse({"--config", file, "--s3-region", "eu-west-1"});
  ASSERT_TRUE(parsed.flags.config.has_value()) << parsed.err;
  const objectstore::S3ConfigOverrides& s3 = parsed.flags.config->s3;
  EXPECT_EQ(s3.endpoint, "http://127.0.0.1:9000");
  EXPECT_EQ(s3.region, "eu-west-1");
  EXPECT_EQ(s3.path_style, true);
  // Not given: left to the AWS environment and files.
  EXPECT_FALSE(s3.profile.has_value());
  EXPECT_FALSE(s3.ca_file.has_value());
  EXPECT_FALSE(s3.access_key_id.has_value());
  EXPECT_FALSE(Parse({}).flags.config->s3.path_style.has_value());

  Parsed bad = Parse({"--s3-addressing", "dns"});
  EXPECT_NE(bad.flags.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("--s3-addressing"));
}

ServerConfig LoopbackConfig(const std::filesystem::path& data_dir) {
  ServerConfig config;
  config.grpc.listen_address = "127.0.0.1:0";
  config.data_dir = data_dir.string();
  config.shutdown_grace = absl::ZeroDuration();
  return config;
}

v1::CreateTrainingJobRequest SmallJob(const std::string& name) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/output");
  return request;
}

TEST(ServerAppTest, ServesAndKeepsAcknowledgedJobsAcrossARestart) {
  ScopedTempDir dir;
  {
    auto app = ServerApp::Start(LoopbackConfig(dir.path()));
    ASSERT_TRUE(app.ok()) << app.status();
    ASSERT_GT((*app)->port(), 0);
    auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*app)->port()),
                                       grpc::InsecureChannelCredentials());
    grpc::ClientContext health_context;
    grpc::health::v1::HealthCheckResponse health;
    ASSERT_TRUE(
        grpc::health::v1::Health::NewStub(channel)->Check(&health_context, {}, &health).ok());
    EXPECT_EQ(health.status(), grpc::health::v1::HealthCheckResponse::SERVING);

    grpc::ClientContext context;
    v1::CreateTrainingJobResponse created;
    grpc::Status status = v1::TrainingJobService::NewStub(channel)->CreateTrainingJob(
        &context, SmallJob("kept"), &created);
    ASSERT_TRUE(status.ok()) << status.error_message();
    (*app)->Shutdown();
  }
  auto again = ServerApp::Start(LoopbackConfig(dir.path()));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_NE((*again)->manager().GetJob("kept"), nullptr);
}

TEST(ServerAppTest, BadFlagValuesAreRefusedNamingThemAndLeaveNothingRunning) {
  ScopedTempDir dir;
  ServerConfig webhook = LoopbackConfig(dir.path());
  webhook.notify_webhooks = {"ftp://example.com/hook"};
  auto refused = ServerApp::Start(webhook);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("--notify-webhook ftp://example.com/hook"));

  ServerConfig root = LoopbackConfig(dir.path());
  root.data_roots = {(dir.path() / "missing").string()};
  refused = ServerApp::Start(root);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("is not an existing directory"));

  ServerConfig evaluator = LoopbackConfig(dir.path());
  evaluator.allowed_evaluators = {"relative/rule.sh"};
  refused = ServerApp::Start(evaluator);
  EXPECT_THAT(refused.status().message(), HasSubstr("give an absolute executable path"));

  // The data directory's lock was released each time.
  auto started = ServerApp::Start(LoopbackConfig(dir.path()));
  EXPECT_TRUE(started.ok()) << started.status();
}

TEST(ServerAppTest, ASecondServerOnTheSameDataDirectoryIsRefused) {
  ScopedTempDir dir;
  auto first = ServerApp::Start(LoopbackConfig(dir.path()));
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = ServerApp::Start(LoopbackConfig(dir.path()));
  ASSERT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr("in use by another debugplane-server"));
}

}  // namespace
}  // namespace debugplane::service
