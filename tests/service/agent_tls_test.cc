// The host agent and TLS, end to end: the real server started with
// --tls-cert/--tls-key (a self-signed certificate made by the openssl
// command), the real agent with --tls/--ca-cert. An agent whose security
// settings do not fit the server's fails fast, before the command starts,
// saying which server and what to change; a server that is merely down is
// waited for.

#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"
#include "tests/service/agent_process.h"
#include "tests/service/server_process.h"
#include "tests/service/training_job_calls.h"
#include "tests/support/wait_until.h"

namespace debugplane {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::AgentProcess;
using ::debugplane::testing::CreateJob;
using ::debugplane::testing::DescribeJob;
using ::debugplane::testing::MinimalJob;
using ::debugplane::testing::ReadFile;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::debugplane::testing::WaitUntil;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// A self-signed certificate for 127.0.0.1: <dir>/cert.pem, <dir>/key.pem.
bool MakeCertificate(const fs::path& dir) {
  const std::string command = absl::StrCat(
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost",
      " -addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout ", (dir / "key.pem").string(),
      " -out ", (dir / "cert.pem").string(), " > /dev/null 2>&1");
  return std::system(command.c_str()) == 0;
}

class AgentTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(MakeCertificate(dir_.path())) << "openssl failed";
    server_ = std::make_unique<ServerProcess>(
        dir_.path() / "data", std::vector<std::string>{"--tls-cert", cert(), "--tls-key",
                                                       (dir_.path() / "key.pem").string()});
  }

  std::string cert() const { return (dir_.path() / "cert.pem").string(); }

  // A TrainingJobService stub over TLS, verifying the server with cert().
  std::unique_ptr<v1::TrainingJobService::Stub> TlsStub(const std::string& address) const {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadFile(cert());
    return v1::TrainingJobService::NewStub(grpc::CreateChannel(address, grpc::SslCredentials(ssl)));
  }

  void Create(v1::TrainingJobService::Stub& stub, const std::string& name) {
    grpc::Status status =
        CreateJob(stub, MinimalJob(name, dir_.path() / "data" / name / "tensors"));
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  std::vector<std::string> AgentArgs(const std::string& address, const std::string& job,
                                     const std::vector<std::string>& tls_flags) {
    std::vector<std::string> args = {"--server",      address,
                                     "--job",         job,
                                     "--config-dir",  (dir_.path() / job / "config").string(),
                                     "--allow-write", dir_.path().string()};
    args.insert(args.end(), tls_flags.begin(), tls_flags.end());
    return args;
  }

  // Runs an agent expected to give up before starting its command: returns
  // its log after checking the exit code (7), that it took less than 10 s
  // and that the command did not run.
  std::string RunFailingAgent(const std::vector<std::string>& args) {
    const fs::path ran = dir_.path() / "ran";
    const absl::Time started = absl::Now();
    AgentProcess agent(args, {"/bin/sh", "-c", "touch " + ran.string()}, dir_.path() / "agent.log",
                       dir_.path());
    EXPECT_EQ(agent.Wait(absl::Seconds(30)), 7) << agent.log();
    EXPECT_LT(absl::Now() - started, absl::Seconds(10)) << agent.log();
    EXPECT_FALSE(fs::exists(ran)) << "the command ran";
    EXPECT_THAT(agent.log(), HasSubstr("not starting the command"));
    return agent.log();
  }

  ScopedTempDir dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(AgentTlsTest, AnAgentWithTheCaCertificateRunsTheJobAndReconnectsOverTls) {
  auto stub = TlsStub(server_->address());
  Create(*stub, "secured");
  // The training runs until the test has seen the reconnection, however
  // long a loaded machine takes (then ends by itself, exit code 0).
  const fs::path reconnection_seen = dir_.path() / "reconnection-seen";
  AgentProcess agent(AgentArgs(server_->address(), "secured", {"--ca-cert", cert()}),
                     {DP_FAKE_TRAINING_BINARY, "--steps", "50", "--step-ms", "20", "--until-file",
                      reconnection_seen.string()},
                     dir_.path() / "agent.log", dir_.path());
  ASSERT_TRUE(WaitUntil([&] {
    return DescribeJob(*stub, "secured").secondary_status() == v1::SecondaryStatus::Training;
  })) << agent.log();
  // kill -9 and back on the same port, with the same certificate: the agent
  // reconnects over TLS while the command runs on.
  server_->RestartOnSamePort();
  const absl::Time restarted = absl::Now();
  stub = TlsStub(server_->address());
  EXPECT_TRUE(WaitUntil([&] { return agent.log().find("reconnected") != std::string::npos; },
                        absl::Seconds(30)))
      << agent.log();
  // At the agent's next attempt (on a new channel; its backoff is 6.4 s by
  // the 7th), not when the old channel's own reconnection finds the server
  // (16 s later, before the fix).
  EXPECT_LT(absl::Now() - restarted, absl::Seconds(12)) << agent.log();
  std::ofstream(reconnection_seen) << "seen\n";
  EXPECT_EQ(agent.Wait(absl::Seconds(60)), 0) << agent.log();
  EXPECT_EQ(DescribeJob(*stub, "secured").training_job_status(), v1::TrainingJobStatus::Completed);
  EXPECT_THAT(agent.log(), AllOf(HasSubstr("reconnected"), Not(HasSubstr("TLS handshake"))));
}

TEST_F(AgentTlsTest, APlaintextAgentOfATlsServerFailsFastSayingSo) {
  auto stub = TlsStub(server_->address());
  Create(*stub, "plain");
  const std::string log = RunFailingAgent(AgentArgs(server_->address(), "plain", {}));
  EXPECT_THAT(log, HasSubstr("no configuration for job 'plain' from " + server_->address() +
                             ": the server at " + server_->address() +
                             " speaks TLS and this connection is plaintext; give --tls"));
  EXPECT_EQ(DescribeJob(*stub, "plain").secondary_status(), v1::SecondaryStatus::Starting);
}

// The CLI gets the same diagnosis instead of "is debugplane-server running?".
TEST_F(AgentTlsTest, ThePlaintextCliOfATlsServerSaysToGiveTls) {
  const std::string command =
      absl::StrCat(DP_CLI_BINARY, " --server ", server_->address(), " list 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[512];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
  const int status = pclose(pipe);
  EXPECT_EQ(WEXITSTATUS(status), 7) << output;
  EXPECT_THAT(output, HasSubstr("speaks TLS and this connection is plaintext; give --tls"));

  const std::string with_ca = absl::StrCat(DP_CLI_BINARY, " --server ", server_->address(),
                                           " --ca-cert ", cert(), " list > /dev/null 2>&1");
  EXPECT_EQ(std::system(with_ca.c_str()), 0);
}

TEST_F(AgentTlsTest, AnAgentThatCannotVerifyTheCertificateFailsFastSayingSo) {
  auto stub = TlsStub(server_->address());
  Create(*stub, "unverified");
  const std::string log = RunFailingAgent(AgentArgs(server_->address(), "unverified", {"--tls"}));
  EXPECT_THAT(log, HasSubstr("TLS handshake with " + server_->address() +
                             " failed: certificate verify failed"));
  EXPECT_THAT(log, HasSubstr("give --ca-cert"));
}

TEST_F(AgentTlsTest, ATlsAgentOfAPlaintextServerFailsFastSayingSo) {
  ScopedTempDir plain_data;
  ServerProcess plaintext(plain_data.path(), {"--data-root", dir_.path().string()});
  auto stub = plaintext.Stub();
  Create(*stub, "mismatched");
  const std::string log =
      RunFailingAgent(AgentArgs(plaintext.address(), "mismatched", {"--tls", "--ca-cert", cert()}));
  EXPECT_THAT(log, HasSubstr("TLS handshake with " + plaintext.address() +
                             " failed: the server speaks plaintext; drop --tls and --ca-cert"));
  EXPECT_EQ(DescribeJob(*stub, "mismatched").secondary_status(), v1::SecondaryStatus::Starting);
}

TEST_F(AgentTlsTest, AnAgentOfAServerThatIsDownKeepsTrying) {
  const std::string address = server_->address();
  server_->Kill(SIGKILL);
  AgentProcess agent(AgentArgs(address, "waiting", {"--ca-cert", cert()}), {"true"},
                     dir_.path() / "agent.log", dir_.path());
  // Longer than a security failure takes to end the agent (well under 1 s).
  absl::SleepFor(absl::Seconds(3));
  EXPECT_TRUE(agent.running()) << agent.log();
  EXPECT_THAT(agent.log(), AllOf(HasSubstr("lost the connection to " + address),
                                 Not(HasSubstr("TLS")), Not(HasSubstr("not starting"))));
}

}  // namespace
}  // namespace debugplane
