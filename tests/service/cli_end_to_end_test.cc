// The `debugplane` CLI binary against the real server: the README's example
// session, exit codes, TLS and the server's config file.

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/core/test_util.h"
#include "tests/service/run_command.h"
#include "tests/service/server_process.h"
#include "tests/support/wait_until.h"

namespace debugplane {
namespace {

using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::debugplane::testing::WaitUntil;
using ::testing::HasSubstr;

using CliResult = ::debugplane::testing::CommandResult;

CliResult RunCli(const std::string& server, const std::string& args,
                 const std::string& extra_global = "", int timeout_seconds = 10) {
  return ::debugplane::testing::RunCommand(absl::StrCat(DP_CLI_BINARY, " --server ", server,
                                                        " --timeout ", timeout_seconds, " ",
                                                        extra_global, " ", args));
}

const std::string kTemplate =
    std::string(DP_SOURCE_DIR) + "/deploy/examples/debugger-training-job.json";

TEST(CliEndToEndTest, TheReadmeSessionWorksWithScriptableExitCodes) {
  ScopedTempDir dir;
  ServerProcess server(dir.path());
  const std::string addr = server.address();
  // The guide's template, with tensors saved under the server's data root
  // (nothing is written there yet, so the rule waits, InProgress).
  std::ifstream in(kTemplate);
  nlohmann::json request = nlohmann::json::parse(in);
  request["DebugHookConfig"]["S3OutputPath"] = (dir.path() / "tensors").string();
  const std::string job_file = (dir.path() / "job.json").string();
  std::ofstream(job_file) << request.dump();

  CliResult created = RunCli(addr, "create --file " + job_file);
  ASSERT_EQ(created.exit_code, 0) << created.out;
  EXPECT_THAT(created.out, HasSubstr("training-job/debugger-aws-cli-test"));

  CliResult again = RunCli(addr, "create --file " + job_file);
  EXPECT_EQ(again.exit_code, 5) << again.out;

  CliResult described = RunCli(addr, "describe debugger-aws-cli-test");
  ASSERT_EQ(described.exit_code, 0) << described.out;
  nlohmann::json job = nlohmann::json::parse(described.out);
  EXPECT_EQ(job["TrainingJobStatus"], "InProgress");
  EXPECT_EQ(job["DebugRuleEvaluationStatuses"][0]["RuleEvaluationStatus"], "InProgress");

  CliResult updated = RunCli(addr, "update debugger-aws-cli-test --interval 100");
  ASSERT_EQ(updated.exit_code, 0) << updated.out;
  CliResult bad_update = RunCli(addr, "update debugger-aws-cli-test --interval 750");
  EXPECT_EQ(bad_update.exit_code, 3) << bad_update.out;
  EXPECT_THAT(bad_update.out, HasSubstr("ProfilingIntervalInMilliseconds"));

  CliResult stopped = RunCli(addr, "stop debugger-aws-cli-test");
  ASSERT_EQ(stopped.exit_code, 0) << stopped.out;
  // The watch starts from the current state and ends once everything is terminal.
  CliResult watched = RunCli(addr, "watch debugger-aws-cli-test");
  ASSERT_EQ(watched.exit_code, 0) << watched.out;
  EXPECT_THAT(watched.out, HasSubstr(R"("TrainingJobStatus":"Stopped")"));

  CliResult listed = RunCli(addr, "list --status Stopped");
  ASSERT_EQ(listed.exit_code, 0) << listed.out;
  EXPECT_THAT(listed.out, HasSubstr("debugger-aws-cli-test"));

  EXPECT_EQ(RunCli(addr, "delete debugger-aws-cli-test").exit_code, 0);
  EXPECT_EQ(RunCli(addr, "describe debugger-aws-cli-test").exit_code, 4);
  EXPECT_EQ(RunCli(addr, "describe bad_name!").exit_code, 3);
}

TEST(CliEndToEndTest, ServerNotRunningIsExitCodeSeven) {
  ScopedTempDir dir;
  ServerProcess server(dir.path());
  const std::string addr = server.address();
  server.Kill(SIGKILL);
  CliResult result = RunCli(addr, "describe anything", "", 2);
  EXPECT_EQ(result.exit_code, 7) << result.out;
}

// Makes a self-signed certificate for 127.0.0.1 with the openssl command.
bool MakeCertificate(const std::filesystem::path& dir) {
  const std::string command = absl::StrCat(
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost",
      " -addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout ", (dir / "key.pem").string(),
      " -out ", (dir / "cert.pem").string(), " > /dev/null 2>&1");
  return std::system(command.c_str()) == 0;
}

TEST(CliEndToEndTest, TlsServerAndClient) {
  ScopedTempDir dir;
  ASSERT_TRUE(MakeCertificate(dir.path())) << "openssl failed";
  ServerProcess server(dir.path(), {"--tls-cert", (dir.path() / "cert.pem").string(), "--tls-key",
                                    (dir.path() / "key.pem").string()});
  const std::string tls = "--tls --ca-cert " + (dir.path() / "cert.pem").string();
  CliResult created = RunCli(server.address(), "create --file " + kTemplate, tls);
  EXPECT_EQ(created.exit_code, 0) << created.out;
  // Plaintext against a TLS server fails as unreachable, not as a crash.
  CliResult plain = RunCli(server.address(), "describe debugger-aws-cli-test", "", 2);
  EXPECT_EQ(plain.exit_code, 7) << plain.out;
  EXPECT_TRUE(server.running());
}

TEST(CliEndToEndTest, ReportFetchesTheProfilingReport) {
  ScopedTempDir dir;
  // Canonical: output paths may not contain "..", and a data root must be a real path.
  const std::string fixtures = std::filesystem::canonical(DP_TEST_DATA_DIR).string();
  ServerProcess server(dir.path(), {"--data-root", fixtures, "--data-root", dir.path().string()});
  const std::string addr = server.address();
  nlohmann::json request = {
      {"TrainingJobName", "profiled"},
      {"RoleArn", "arn:aws:iam::111122223333:role/service-role/Test"},
      {"OutputDataConfig", {{"S3OutputPath", "s3://bucket/out"}}},
      {"ProfilerConfig", {{"S3OutputPath", fixtures + "/profiler/framework/pytorch-step-outlier"}}},
      {"ProfilerRuleConfigurations",
       {{{"RuleConfigurationName", "ProfilerReport"},
         {"RuleEvaluatorImage", "builtin"},
         {"RuleParameters", {{"rule_to_invoke", "ProfilerReport"}}}}}}};
  std::ofstream(dir.path() / "job.json") << request.dump();
  request["TrainingJobName"] = "unprofiled";
  request.erase("ProfilerRuleConfigurations");
  std::ofstream(dir.path() / "plain.json") << request.dump();
  CliResult created = RunCli(addr, "create --file " + (dir.path() / "job.json").string());
  ASSERT_EQ(created.exit_code, 0) << created.out;
  created = RunCli(addr, "create --file " + (dir.path() / "plain.json").string());
  ASSERT_EQ(created.exit_code, 0) << created.out;

  // The first report is written by the rule's first pass.
  CliResult json;
  WaitUntil([&] {
    json = RunCli(addr, "report profiled --json -o -");
    if (json.exit_code == 0) return true;
    EXPECT_EQ(json.exit_code, 4) << json.out;  // No report yet.
    return false;
  });
  ASSERT_EQ(json.exit_code, 0) << json.out;
  EXPECT_EQ(nlohmann::json::parse(json.out)["rule_configuration_name"], "ProfilerReport");

  const std::string html_file = (dir.path() / "report.html").string();
  CliResult saved = RunCli(addr, "report profiled -o " + html_file);
  EXPECT_EQ(saved.exit_code, 0) << saved.out;
  EXPECT_EQ(nlohmann::json::parse(saved.out)["Path"], html_file);
  std::ifstream in(html_file);
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(html, HasSubstr("<html"));
  EXPECT_THAT(html, HasSubstr("profiled"));

  CliResult where = RunCli(addr, "--output text report profiled");
  EXPECT_EQ(where.exit_code, 0) << where.out;
  EXPECT_THAT(where.out, HasSubstr("reports/profiled/ProfilerReport/profiler-report.html"));

  // A file that cannot be written: exit 1, naming it; nothing half-written.
  const std::string unwritable = (dir.path() / "missing-dir" / "report.html").string();
  CliResult failed = RunCli(addr, "report profiled -o " + unwritable);
  EXPECT_EQ(failed.exit_code, 1) << failed.out;
  EXPECT_THAT(failed.out, HasSubstr(unwritable));
  EXPECT_FALSE(std::filesystem::exists(unwritable));

  CliResult no_rule = RunCli(addr, "report unprofiled");
  EXPECT_EQ(no_rule.exit_code, 6) << no_rule.out;
  EXPECT_THAT(no_rule.out, HasSubstr("no ProfilerReport rule"));
  EXPECT_EQ(RunCli(addr, "report missing").exit_code, 4);
}

TEST(CliEndToEndTest, ServerReadsFlagsFromAConfigFile) {
  ScopedTempDir dir;
  ScopedTempDir root;
  std::ofstream(dir.path() / "server.toml") << "data-root = [\"" << root.path().string() << "\"]\n"
                                            << "log-level = \"error\"\n";
  ServerProcess server(dir.path(), {"--config", (dir.path() / "server.toml").string()});
  // The configured data root is in force: a local path inside it is accepted.
  std::ifstream in(kTemplate);
  nlohmann::json request = nlohmann::json::parse(in);
  request["DebugHookConfig"]["S3OutputPath"] = (root.path() / "tensors").string();
  std::ofstream(dir.path() / "job.json") << request.dump();
  CliResult created =
      RunCli(server.address(), "create --file " + (dir.path() / "job.json").string());
  EXPECT_EQ(created.exit_code, 0) << created.out;
  request["TrainingJobName"] = "outside";
  request["DebugHookConfig"]["S3OutputPath"] = (dir.path() / "tensors").string();
  std::ofstream(dir.path() / "job2.json") << request.dump();
  CliResult refused =
      RunCli(server.address(), "create --file " + (dir.path() / "job2.json").string());
  EXPECT_EQ(refused.exit_code, 3) << refused.out;
  EXPECT_THAT(refused.out, HasSubstr("DebugHookConfig.S3OutputPath"));
}

}  // namespace
}  // namespace debugplane
