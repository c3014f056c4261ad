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
#include "nlohmann/json.hpp"
#include "service/logging.h"
#include "service/server_flags.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/service/auth/auth_test_util.h"

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
  webhook.notify_webhooks = {"ftp://example.com/hook/SECRET"};
  auto refused = ServerApp::Start(webhook);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("--notify-webhook ftp://example.com is not an http:// or https:// URL"));
  EXPECT_THAT(refused.status().message(), ::testing::Not(HasSubstr("SECRET")));

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

// What the default logger writes while it lives (read it after the
// threads that log are gone).
class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    auto logger = std::make_shared<spdlog::logger>(
        "captured", std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_));
    logger->set_formatter(MakeLogFormatter("text"));
    spdlog::set_default_logger(std::move(logger));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  std::string text() const { return stream_.str(); }

 private:
  std::ostringstream stream_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST(ServerAppTest, StartUpWarnsOfUnboundAgentKeysAndNamesSinksWithoutTheirSecrets) {
  ScopedTempDir dir;
  const std::filesystem::path credentials = dir.path() / "credentials";
  debugplane::testing::WriteCredentials(credentials,
                                        "admin ADMIN admin-secret\n"
                                        "agent AGENT-ANY agent-secret\n"
                                        "agent AGENT-A agent-secret-a job-a\n");
  ServerConfig config = LoopbackConfig(dir.path() / "data");
  config.credentials_file = credentials.string();
  config.notify_webhooks = {"http://user:pw@127.0.0.1:9/services/T/B/H00kT0ken"};
  std::string log;
  {
    CapturedLog captured;
    auto app = ServerApp::Start(config);
    ASSERT_TRUE(app.ok()) << app.status();
    app->reset();
    log = captured.text();
  }
  EXPECT_THAT(log, HasSubstr("agent credential 'AGENT-ANY' names no job, so it can act for every "
                             "job"));
  EXPECT_THAT(log, ::testing::Not(HasSubstr("'AGENT-A'")));
  EXPECT_THAT(log, HasSubstr("notifications go to webhook http://127.0.0.1:9"));
  EXPECT_THAT(log, ::testing::Not(HasSubstr("H00kT0ken")));
  EXPECT_THAT(log, ::testing::Not(HasSubstr("pw@")));
}

// A message holding a line break (a name from a request, a line of a
// training file) stays one log line in either format.
TEST(LoggingTest, AMessageWithLineBreaksIsOneLogLine) {
  for (const std::string format : {"text", "json"}) {
    std::ostringstream stream;
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(stream);
    spdlog::logger logger("test", sink);
    logger.set_formatter(MakeLogFormatter(format));
    logger.warn("rule '{}' failed", "Loss\r\n2026-01-01 info [debugplane] forged\x1b[2J\x7f");
    const std::string line = stream.str();
    ASSERT_FALSE(line.empty());
    EXPECT_EQ(line.find('\n'), line.size() - 1) << format << ": " << line;
    EXPECT_EQ(line.find('\r'), std::string::npos) << format;
    EXPECT_EQ(line.find('\x1b'), std::string::npos) << format;
    if (format == "text") {
      // JSON leaves DEL as it is (it breaks no line); the text format
      // escapes every control character.
      EXPECT_EQ(line.find('\x7f'), std::string::npos);
      EXPECT_THAT(line, HasSubstr("rule 'Loss\\r\\n2026-01-01 info [debugplane] "
                                  "forged\\x1b[2J\\x7f' failed"));
    } else {
      EXPECT_EQ(nlohmann::json::parse(line)["msg"],
                "rule 'Loss\r\n2026-01-01 info [debugplane] forged\x1b[2J\x7f' failed");
    }
  }
}

}  // namespace
}  // namespace debugplane::service
