// Training on another host (issue 11): the agent with its training process
// (dp_fake_training), the server and the S3 store (moto) each run in a
// network namespace of their own, made by the test and linked by veth pairs
// with addresses that exist only inside them, and each has its own
// directory. The agent reaches the server and the store over the links, the
// server reads what the agent uploaded over its own link to the store, and
// ExplodingTensor's IssuesFound stops the training. The test talks to the
// server over the server namespace's loopback (a socket opened in it).
//
// Needs root and iproute2 (`ip netns`): when a namespace cannot be made, the
// test fails saying why; it never skips.
//
//   agent ns  10.211.1.1 ---- 10.211.1.2  server ns
//   agent ns  10.211.2.1 ---- 10.211.2.2  store ns
//   server ns 10.211.3.1 ---- 10.211.3.2  store ns

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel_posix.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"
#include "tests/objectstore/s3_test_server.h"
#include "tests/service/agent_process.h"
#include "tests/service/aws_environment.h"
#include "tests/service/network_namespaces.h"
#include "tests/service/server_process.h"
#include "tests/service/training_job_calls.h"

namespace debugplane {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::AgentProcess;
using ::debugplane::testing::AwsEnvironment;
using ::debugplane::testing::Connect;
using ::debugplane::testing::CreateJob;
using ::debugplane::testing::DescribeJob;
using ::debugplane::testing::NetworkNamespace;
using ::debugplane::testing::S3TestServer;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::testing::HasSubstr;

constexpr char kBucket[] = "remote-output";
constexpr char kServerOnAgentLink[] = "10.211.1.2";
constexpr char kStoreOnAgentLink[] = "10.211.2.2";
constexpr char kStoreOnServerLink[] = "10.211.3.2";

// A TCP connection to 127.0.0.1:`port` opened in `ns` (so on its loopback),
// or -1 with a test failure.
int ConnectInNamespace(const NetworkNamespace& ns, int port) {
  int fd = -1;
  absl::Status entered = ns.Run([&] {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
      ADD_FAILURE() << "cannot connect to the server in " << ns.name() << ": "
                    << std::strerror(errno);
      close(fd);
      fd = -1;
    }
  });
  EXPECT_TRUE(entered.ok()) << entered;
  return fd;
}

v1::CreateTrainingJobRequest Job(const std::string& name) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_output_data_config()->set_s3_output_path(
      absl::StrCat("s3://", kBucket, "/", name));
  request.mutable_debug_hook_config()->set_s3_output_path(
      absl::StrCat("s3://", kBucket, "/", name, "/debug-output"));
  auto* rule = request.add_debug_rule_configurations();
  rule->set_rule_configuration_name("ExplodingTensor");
  rule->set_rule_evaluator_image("builtin");
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = "ExplodingTensor";
  (*rule->mutable_rule_parameters())["action_json"] = R"({"name": "stoptraining"})";
  return request;
}

TEST(AgentOnAnotherHostTest, UploadsOverTheNetworkAndTheRuleStopsTheTraining) {
  // The hosts and their links; any failure here is the test's failure.
  absl::StatusOr<std::unique_ptr<NetworkNamespace>> agent_ns = NetworkNamespace::Create("agent");
  ASSERT_TRUE(agent_ns.ok()) << "cannot make the agent's network namespace: " << agent_ns.status();
  absl::StatusOr<std::unique_ptr<NetworkNamespace>> server_ns = NetworkNamespace::Create("server");
  ASSERT_TRUE(server_ns.ok()) << "cannot make the server's network namespace: "
                              << server_ns.status();
  absl::StatusOr<std::unique_ptr<NetworkNamespace>> store_ns = NetworkNamespace::Create("store");
  ASSERT_TRUE(store_ns.ok()) << "cannot make the store's network namespace: " << store_ns.status();
  absl::Status linked = Connect(**agent_ns, "10.211.1.1/30", **server_ns, "10.211.1.2/30", "as");
  if (linked.ok()) {
    linked = Connect(**agent_ns, "10.211.2.1/30", **store_ns, "10.211.2.2/30", "at");
  }
  if (linked.ok()) {
    linked = Connect(**server_ns, "10.211.3.1/30", **store_ns, "10.211.3.2/30", "st");
  }
  ASSERT_TRUE(linked.ok()) << "cannot link the namespaces: " << linked;

  // Each host its own directory.
  ScopedTempDir server_dir, agent_dir, test_dir;

  // The store, on every address of its namespace.
  std::unique_ptr<S3TestServer> s3;
  absl::Status ran = (*store_ns)->Run([&] {
    absl::StatusOr<std::unique_ptr<S3TestServer>> started =
        S3TestServer::Start({.buckets = {kBucket}, .host = "0.0.0.0"});
    ASSERT_TRUE(started.ok()) << started.status();
    s3 = *std::move(started);
  });
  ASSERT_TRUE(ran.ok()) << ran;
  ASSERT_NE(s3, nullptr);

  // The server, reading the store over its link.
  std::unique_ptr<ServerProcess> server;
  {
    AwsEnvironment env(server_dir.path(),
                       absl::StrCat("http://", kStoreOnServerLink, ":", s3->port()),
                       s3->access_key_id(), s3->secret_access_key());
    ran = (*server_ns)->Run([&] {
      // --insecure: the server's network is the test's own veth links, which
      // exist only inside these namespaces.
      server = std::make_unique<ServerProcess>(server_dir.path() / "data",
                                               std::vector<std::string>{"--insecure"}, "0.0.0.0:0");
    });
  }
  ASSERT_TRUE(ran.ok()) << ran;
  ASSERT_NE(server, nullptr);
  ASSERT_GT(server->port(), 0);
  const int fd = ConnectInNamespace(**server_ns, server->port());
  ASSERT_GE(fd, 0);
  auto stub =
      v1::TrainingJobService::NewStub(grpc::CreateInsecureChannelFromFd("debugplane-server", fd));

  const std::string job = "remote";
  grpc::Status created = CreateJob(*stub, Job(job));
  ASSERT_TRUE(created.ok()) << created.error_message();

  // The agent and its training, uploading to the store over their link.
  std::unique_ptr<AgentProcess> agent;
  {
    AwsEnvironment env(agent_dir.path(),
                       absl::StrCat("http://", kStoreOnAgentLink, ":", s3->port()),
                       s3->access_key_id(), s3->secret_access_key());
    fs::create_directories(agent_dir.path() / "tmp");
    ran = (*agent_ns)->Run([&] {
      agent = std::make_unique<AgentProcess>(
          std::vector<std::string>{"--server",
                                   absl::StrCat(kServerOnAgentLink, ":", server->port()), "--job",
                                   job, "--stop-grace", "1", "--upload-wait", "30"},
          std::vector<std::string>{DP_FAKE_TRAINING_BINARY, "--steps", "100000", "--step-ms", "20",
                                   "--nan-at", "10", "--ignore-term"},
          test_dir.path() / "agent.log", agent_dir.path(),
          std::vector<std::pair<std::string, std::string>>{
              {"TMPDIR", (agent_dir.path() / "tmp").string()}});
    });
  }
  ASSERT_TRUE(ran.ok()) << ran;
  ASSERT_NE(agent, nullptr);
  // Stopped by the rule: the training ignores SIGTERM, so the agent kills
  // it after --stop-grace and exits as it did.
  EXPECT_EQ(agent->Wait(absl::Seconds(120)), 128 + SIGKILL) << agent->log();

  const v1::DescribeTrainingJobResponse described = DescribeJob(*stub, job);
  EXPECT_EQ(described.training_job_status(), v1::TrainingJobStatus::Stopped);
  ASSERT_EQ(described.debug_rule_evaluation_statuses_size(), 1);
  const v1::DebugRuleEvaluationStatus& rule = described.debug_rule_evaluation_statuses(0);
  EXPECT_EQ(rule.rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound)
      << rule.status_details();
  EXPECT_THAT(rule.status_details(), HasSubstr("step 10"));
  // What the server read came over the network from the store.
  EXPECT_GT(rule.read_progress().objects_read(), 0);
  EXPECT_GE(rule.read_progress().last_step_read(), 10);
  const std::string log = agent->log();
  EXPECT_THAT(log, HasSubstr(absl::StrCat("to s3://", kBucket, "/", job, "/debug-output")));
  EXPECT_THAT(log, HasSubstr("Stopped by rule ExplodingTensor"));

  // The processes end before their namespaces go (the destructors of the
  // namespaces, declared first, run last).
  agent.reset();
  stub.reset();
  server.reset();
  s3.reset();
}

}  // namespace
}  // namespace debugplane
