// Client certificates (--client-ca, roles from `cn:` lines), the clients'
// tokens (--token, DEBUGPLANE_TOKEN, --token-file; the agent's), and the
// in-process server's secure-by-default start.

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "service/server_app.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/service/agent_process.h"
#include "tests/service/auth/auth_test_util.h"
#include "tests/service/server_process.h"

namespace debugplane {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::AgentProcess;
using ::debugplane::testing::MakeCa;
using ::debugplane::testing::MakeSignedCertificate;
using ::debugplane::testing::ReadFile;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::debugplane::testing::TokenContext;
using ::debugplane::testing::WriteCredentials;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

v1::CreateTrainingJobRequest JobRequest(const fs::path& data_dir, const std::string& name) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
  request.mutable_debug_hook_config()->set_s3_output_path((data_dir / name / "tensors").string());
  return request;
}

class MutualTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path& d = dir_.path();
    ASSERT_TRUE(MakeCa(d, "ca") && MakeCa(d, "rogue-ca"));
    ASSERT_TRUE(MakeSignedCertificate(d, "ca", "server", "localhost", /*server=*/true));
    ASSERT_TRUE(MakeSignedCertificate(d, "ca", "dashboard", "dashboard"));
    ASSERT_TRUE(MakeSignedCertificate(d, "ca", "stranger", "stranger"));
    ASSERT_TRUE(MakeSignedCertificate(d, "rogue-ca", "impostor", "dashboard"));
    WriteCredentials(d / "credentials", "admin ADMIN admin-secret\nreader cn:dashboard -\n");
    server_ = std::make_unique<ServerProcess>(
        d / "data", std::vector<std::string>{"--tls-cert", Path("server.pem"), "--tls-key",
                                             Path("server.key"), "--client-ca", Path("ca.pem"),
                                             "--credentials", Path("credentials")});
  }

  std::string Path(const std::string& name) const { return (dir_.path() / name).string(); }

  // A stub over TLS presenting the certificate `client` ("" for none).
  std::unique_ptr<v1::TrainingJobService::Stub> Stub(const std::string& client) const {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadFile(Path("ca.pem"));
    if (!client.empty()) {
      ssl.pem_cert_chain = ReadFile(Path(client + ".pem"));
      ssl.pem_private_key = ReadFile(Path(client + ".key"));
    }
    return v1::TrainingJobService::NewStub(
        grpc::CreateChannel(server_->address(), grpc::SslCredentials(ssl)));
  }

  static grpc::Status List(v1::TrainingJobService::Stub& stub, const std::string& token = "") {
    v1::ListTrainingJobsResponse response;
    return stub.ListTrainingJobs(TokenContext(token, 5).get(), {}, &response);
  }

  ScopedTempDir dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(MutualTlsTest, AKnownCasCertificateAuthenticatesAsItsMappedRole) {
  auto dashboard = Stub("dashboard");
  grpc::Status listed = List(*dashboard);
  EXPECT_TRUE(listed.ok()) << listed.error_message();
  v1::StopTrainingJobRequest stop;
  stop.set_training_job_name("job");
  v1::StopTrainingJobResponse stopped;
  grpc::Status refused = dashboard->StopTrainingJob(TokenContext("", 5).get(), stop, &stopped);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(refused.error_message(), HasSubstr("access key 'cn:dashboard' (role reader)"));
  // A bearer token on the same connection takes precedence over the certificate.
  EXPECT_EQ(dashboard->StopTrainingJob(TokenContext("ADMIN:admin-secret", 5).get(), stop, &stopped)
                .error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(MutualTlsTest, AnUnmappedNameIsUnauthenticatedAndAnUnknownCaFailsTheHandshake) {
  grpc::Status stranger = List(*Stub("stranger"));
  EXPECT_EQ(stranger.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(stranger.error_message(), HasSubstr("'stranger'"));
  grpc::Status impostor = List(*Stub("impostor"));
  EXPECT_EQ(impostor.error_code(), grpc::StatusCode::UNAVAILABLE) << impostor.error_message();
}

TEST_F(MutualTlsTest, WithoutACertificateBearerTokensStillWork) {
  auto plain = Stub("");
  EXPECT_TRUE(List(*plain, "ADMIN:admin-secret").ok());
  EXPECT_EQ(List(*plain).error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

struct CliResult {
  int exit_code = -1;
  std::string out;  // stdout and stderr together.
};

CliResult RunCli(const std::string& prefix, const std::string& args) {
  const std::string command = absl::StrCat(prefix, " ", DP_CLI_BINARY, " ", args, " 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  CliResult result;
  char buffer[4096];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) result.out += buffer;
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

class ClientTokenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteCredentials(dir_.path() / "credentials",
                     "admin ADMIN admin-secret\nreader READER reader-secret\n"
                     "agent AGENT-A agent-secret job-a\n");
    server_ = std::make_unique<ServerProcess>(
        dir_.path() / "data",
        std::vector<std::string>{"--credentials", (dir_.path() / "credentials").string()});
    server_flag_ = "--server " + server_->address();
  }
  ScopedTempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::string server_flag_;
};

TEST_F(ClientTokenTest, TheCliSendsTheTokenFromTheFlagTheEnvironmentOrAFile) {
  CliResult listed = RunCli("", server_flag_ + " --token READER:reader-secret list");
  EXPECT_EQ(listed.exit_code, 0) << listed.out;
  listed = RunCli("DEBUGPLANE_TOKEN=READER:reader-secret", server_flag_ + " list");
  EXPECT_EQ(listed.exit_code, 0) << listed.out;
  const fs::path token_file = dir_.path() / "token";
  WriteCredentials(token_file, "\n  READER:reader-secret  \n");
  listed = RunCli("", server_flag_ + " --token-file " + token_file.string() + " list");
  EXPECT_EQ(listed.exit_code, 0) << listed.out;
}

TEST_F(ClientTokenTest, TheCliSaysWhyItIsNotAllowedWithExitCode8AndNoSecret) {
  CliResult none = RunCli("", server_flag_ + " list");
  EXPECT_EQ(none.exit_code, 8) << none.out;
  EXPECT_THAT(none.out, AllOf(HasSubstr("error: UNAUTHENTICATED: no credentials"),
                              HasSubstr("give --token ACCESS_KEY_ID:SECRET")));
  CliResult wrong = RunCli("", server_flag_ + " --token READER:guessed-secret list");
  EXPECT_EQ(wrong.exit_code, 8) << wrong.out;
  EXPECT_THAT(wrong.out, AllOf(HasSubstr("wrong secret for access key 'READER'"),
                               Not(HasSubstr("guessed-secret"))));
  CliResult denied = RunCli("", server_flag_ + " --token READER:reader-secret stop job-x");
  EXPECT_EQ(denied.exit_code, 8) << denied.out;
  EXPECT_THAT(denied.out, AllOf(HasSubstr("error: PERMISSION_DENIED: access key 'READER' (role "
                                          "reader) may not StopTrainingJob"),
                                Not(HasSubstr("reader-secret"))));
  CliResult malformed = RunCli("", server_flag_ + " --token no-colon-secret list");
  EXPECT_EQ(malformed.exit_code, 2) << malformed.out;
  EXPECT_THAT(malformed.out, AllOf(HasSubstr("ACCESS_KEY_ID:SECRET_ACCESS_KEY"),
                                   Not(HasSubstr("no-colon-secret"))));
}

TEST_F(ClientTokenTest, AnAgentWithItsTokenRunsItsJobAndOneWithoutIsRefused) {
  auto stub = v1::TrainingJobService::NewStub(server_->Channel());
  v1::CreateTrainingJobResponse created;
  ASSERT_TRUE(stub->CreateTrainingJob(TokenContext("ADMIN:admin-secret").get(),
                                      JobRequest(dir_.path() / "data", "job-a"), &created)
                  .ok());
  const std::vector<std::string> base = {"--server",      server_->address(),
                                         "--job",         "job-a",
                                         "--config-dir",  (dir_.path() / "config").string(),
                                         "--allow-write", dir_.path().string()};
  const fs::path ran = dir_.path() / "ran";
  {
    AgentProcess refused(base, {"/bin/sh", "-c", "touch " + ran.string()},
                         dir_.path() / "refused.log", dir_.path());
    EXPECT_NE(refused.Wait(absl::Seconds(30)), 0) << refused.log();
    EXPECT_FALSE(fs::exists(ran));
    EXPECT_THAT(refused.log(), HasSubstr("no credentials"));
  }
  std::vector<std::string> with_token = base;
  with_token.insert(with_token.end(), {"--token", "AGENT-A:agent-secret"});
  AgentProcess agent(with_token, {DP_FAKE_TRAINING_BINARY, "--steps", "5", "--step-ms", "10"},
                     dir_.path() / "agent.log", dir_.path());
  EXPECT_EQ(agent.Wait(absl::Seconds(60)), 0) << agent.log();
  EXPECT_THAT(agent.log(), Not(HasSubstr("agent-secret")));
  v1::DescribeTrainingJobRequest describe;
  describe.set_training_job_name("job-a");
  v1::DescribeTrainingJobResponse job;
  ASSERT_TRUE(
      stub->DescribeTrainingJob(TokenContext("READER:reader-secret").get(), describe, &job).ok());
  EXPECT_EQ(job.training_job_status(), v1::TrainingJobStatus::Completed);
}

TEST_F(ClientTokenTest, TheAgentKeepsItsTokenOutOfTheTrainingCommandsEnvironment) {
  auto stub = v1::TrainingJobService::NewStub(server_->Channel());
  v1::CreateTrainingJobResponse created;
  ASSERT_TRUE(stub->CreateTrainingJob(TokenContext("ADMIN:admin-secret").get(),
                                      JobRequest(dir_.path() / "data", "job-a"), &created)
                  .ok());
  const fs::path printed = dir_.path() / "environment";
  AgentProcess agent({"--server", server_->address(), "--job", "job-a", "--config-dir",
                      (dir_.path() / "config").string(), "--allow-write", dir_.path().string()},
                     {"/bin/sh", "-c", "env > " + printed.string()}, dir_.path() / "agent.log",
                     dir_.path(),
                     {{"DEBUGPLANE_TOKEN", "AGENT-A:agent-secret"},
                      {"AWS_REGION", "eu-west-1"},
                      {"DP_TEST_UNRELATED", "kept"}});
  ASSERT_EQ(agent.Wait(absl::Seconds(60)), 0) << agent.log();
  const std::string environment = ReadFile(printed);
  // The agent authenticated with it (the job ran), the command never saw it.
  EXPECT_THAT(environment, AllOf(Not(HasSubstr("DEBUGPLANE_TOKEN")), Not(HasSubstr("agent-secret"))));
  // The rest of the agent's environment, and what the agent adds, is there.
  EXPECT_THAT(environment, AllOf(HasSubstr("DP_TEST_UNRELATED=kept\n"),
                                 HasSubstr("AWS_REGION=eu-west-1\n"),
                                 HasSubstr("DP_TRAINING_JOB_NAME=job-a\n"),
                                 HasSubstr("SMDEBUG_CONFIG_FILE_PATH=")));
}

TEST(SecureByDefaultTest, ANonLoopbackAddressStartsOnlyWithInsecure) {
  ScopedTempDir dir;
  service::ServerConfig config;
  config.grpc.listen_address = "0.0.0.0:0";
  config.data_dir = (dir.path() / "data").string();
  config.shutdown_grace = absl::ZeroDuration();
  auto refused = service::ServerApp::Start(config);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  config.insecure = true;
  auto started = service::ServerApp::Start(config);
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_FALSE((*started)->authenticator()->enabled());
}

}  // namespace
}  // namespace debugplane
