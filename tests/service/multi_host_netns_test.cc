// Training across hosts (issue 26): one job of InstanceCount 3, one real
// agent per host with its training process (dp_fake_training), the server
// and the S3 store (moto), each in a network namespace of its own linked by
// veth pairs (tests/service/network_namespaces.h). The agents upload to the
// store and report to the server over their links; the test talks to the
// server over the server namespace's loopback.
//
//   host<i> 10.213.<i>.1 ---- 10.213.<i>.2 server   (i = 1..3)
//   host<i> 10.214.<i>.1 ---- 10.214.<i>.2 store
//   server  10.215.0.1   ---- 10.215.0.2   store
//
// One cluster for the suite (namespaces, store, server), a job per test.
// Needs root and iproute2: when a namespace cannot be made the test fails
// saying why; it never skips.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel_posix.h"
#include "gtest/gtest.h"
#include "objectstore/s3_object_store.h"
#include "tests/objectstore/s3_test_server.h"
#include "tests/service/agent_process.h"
#include "tests/service/aws_environment.h"
#include "tests/service/network_namespaces.h"
#include "tests/service/server_process.h"
#include "tests/service/training_job_calls.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/support/wait_until.h"

namespace debugplane {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::AgentProcess;
using ::debugplane::testing::AwsEnvironment;
using ::debugplane::testing::Connect;
using ::debugplane::testing::CreateJob;
using ::debugplane::testing::DescribeJob;
using ::debugplane::testing::NetworkNamespace;
using ::debugplane::testing::RunIp;
using ::debugplane::testing::S3TestServer;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::debugplane::testing::WaitUntil;
using ::testing::HasSubstr;
using HostStatus = v1::TrainingHostStatus;

constexpr int kHosts = 3;
constexpr char kBucket[] = "multi-host";
constexpr absl::Duration kReconnectWait = absl::Seconds(3);

// The suite's hosts, store and server.
struct Cluster {
  std::unique_ptr<NetworkNamespace> server_ns, store_ns;
  std::array<std::unique_ptr<NetworkNamespace>, kHosts> host_ns;
  ScopedTempDir server_dir, test_dir;
  std::array<ScopedTempDir, kHosts> host_dir;
  std::unique_ptr<S3TestServer> s3;
  std::unique_ptr<ServerProcess> server;
};

absl::Status LinkCluster(Cluster& c) {
  for (int i = 1; i <= kHosts; ++i) {
    const NetworkNamespace& host = *c.host_ns[i - 1];
    absl::Status linked = Connect(host, absl::StrCat("10.213.", i, ".1/30"), *c.server_ns,
                                  absl::StrCat("10.213.", i, ".2/30"), absl::StrCat("h", i, "s"));
    if (linked.ok()) {
      linked = Connect(host, absl::StrCat("10.214.", i, ".1/30"), *c.store_ns,
                       absl::StrCat("10.214.", i, ".2/30"), absl::StrCat("h", i, "t"));
    }
    if (!linked.ok()) return linked;
  }
  return Connect(*c.server_ns, "10.215.0.1/30", *c.store_ns, "10.215.0.2/30", "st");
}

// A TCP connection to 127.0.0.1:`port` opened in `ns`, or -1.
int ConnectInNamespace(const NetworkNamespace& ns, int port) {
  int fd = -1;
  absl::Status entered = ns.Run([&] {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
      close(fd);
      fd = -1;
    }
  });
  return entered.ok() ? fd : -1;
}

absl::Status StartCluster(Cluster& c) {
  for (auto [slot, what] : {std::pair{&c.server_ns, "mserver"}, std::pair{&c.store_ns, "mstore"}}) {
    absl::StatusOr<std::unique_ptr<NetworkNamespace>> ns = NetworkNamespace::Create(what);
    if (!ns.ok()) return ns.status();
    *slot = *std::move(ns);
  }
  for (int i = 0; i < kHosts; ++i) {
    absl::StatusOr<std::unique_ptr<NetworkNamespace>> ns =
        NetworkNamespace::Create(absl::StrCat("host", i + 1));
    if (!ns.ok()) return ns.status();
    c.host_ns[i] = *std::move(ns);
  }
  if (absl::Status linked = LinkCluster(c); !linked.ok()) return linked;
  absl::Status ran = c.store_ns->Run([&] {
    absl::StatusOr<std::unique_ptr<S3TestServer>> started =
        S3TestServer::Start({.buckets = {kBucket}, .host = "0.0.0.0"});
    if (started.ok()) c.s3 = *std::move(started);
  });
  if (!ran.ok()) return ran;
  if (c.s3 == nullptr) return absl::InternalError("the S3 test server did not start");
  {
    AwsEnvironment env(c.server_dir.path(), absl::StrCat("http://10.215.0.2:", c.s3->port()),
                       c.s3->access_key_id(), c.s3->secret_access_key());
    ran = c.server_ns->Run([&] {
      // --insecure: the network is the test's own veth links. Seconds for
      // the bounds and pings that are minutes on a real cluster.
      c.server = std::make_unique<ServerProcess>(
          c.server_dir.path() / "data",
          std::vector<std::string>{"--insecure", "--keepalive", "1", "--host-connect-wait", "60",
                                   "--host-reconnect-wait",
                                   absl::StrCat(absl::ToInt64Seconds(kReconnectWait))},
          "0.0.0.0:0");
    });
  }
  if (!ran.ok()) return ran;
  if (c.server == nullptr || c.server->port() <= 0) {
    return absl::InternalError("the server did not start");
  }
  return absl::OkStatus();
}

// A stub on a new connection to the server, opened in its namespace. One
// per call: a channel made from a socket cannot reconnect, and such a
// channel was seen closed between calls ("Socket closed") with the
// server's --keepalive 1 (the agents' and the CLI's channels are not).
std::unique_ptr<v1::TrainingJobService::Stub> Server(const Cluster& c) {
  const int fd = ConnectInNamespace(*c.server_ns, c.server->port());
  EXPECT_GE(fd, 0) << "cannot connect to the server in its namespace";
  return v1::TrainingJobService::NewStub(grpc::CreateInsecureChannelFromFd("server", fd));
}

class MultiHostNetnsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new Cluster();
    setup_ = StartCluster(*cluster_);
  }
  static void TearDownTestSuite() {
    // The processes end before their namespaces go.
    cluster_->server.reset();
    cluster_->s3.reset();
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(setup_.ok()) << "cannot build the cluster: " << setup_; }
  void TearDown() override {
    for (auto& agent : agents_) agent.reset();
  }

  static v1::CreateTrainingJobRequest Job(const std::string& name) {
    v1::CreateTrainingJobRequest request;
    request.set_training_job_name(name);
    request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
    request.mutable_resource_config()->set_instance_count(kHosts);
    request.mutable_output_data_config()->set_s3_output_path(
        absl::StrCat("s3://", kBucket, "/", name));
    request.mutable_debug_hook_config()->set_s3_output_path(
        absl::StrCat("s3://", kBucket, "/", name, "/debug-output"));
    auto* rule = request.add_debug_rule_configurations();
    rule->set_rule_configuration_name("ExplodingTensor");
    rule->set_rule_evaluator_image("builtin");
    (*rule->mutable_rule_parameters())["rule_to_invoke"] = "ExplodingTensor";
    return request;
  }

  // Starts host `i`'s agent (1-based) for `job` with `training` flags for
  // dp_fake_training. Its name comes as a launcher gives it: --node-id,
  // SageMaker's SM_CURRENT_HOST, torchrun's NODE_RANK.
  void StartAgent(int i, const std::string& job, std::vector<std::string> training) {
    Cluster& c = *cluster_;
    const fs::path dir = c.host_dir[i - 1].path() / job;
    fs::create_directories(dir / "tmp");
    std::vector<std::string> args = {"--server", absl::StrCat("10.213.", i, ".2:", c.server->port()),
                                     "--job", job, "--stop-grace", "1", "--upload-wait", "30"};
    std::vector<std::pair<std::string, std::string>> env = {{"TMPDIR", (dir / "tmp").string()}};
    if (i == 1) args.insert(args.end(), {"--node-id", "algo-1"});
    if (i == 2) env.emplace_back("SM_CURRENT_HOST", "algo-2");
    if (i == 3) env.emplace_back("NODE_RANK", "2");
    std::vector<std::string> command = {DP_FAKE_TRAINING_BINARY, "--rank", absl::StrCat(i - 1),
                                        "--num-workers", absl::StrCat(kHosts), "--step-ms", "20"};
    command.insert(command.end(), training.begin(), training.end());
    AwsEnvironment aws(dir, absl::StrCat("http://10.214.", i, ".2:", c.s3->port()),
                       c.s3->access_key_id(), c.s3->secret_access_key());
    absl::Status ran = c.host_ns[i - 1]->Run([&] {
      agents_[i - 1] = std::make_unique<AgentProcess>(
          args, command, c.test_dir.path() / absl::StrCat(job, "-host", i, ".log"), dir, env);
    });
    ASSERT_TRUE(ran.ok()) << ran;
  }

  // The nodes whose system metrics are in the store under `prefix`
  // (".../system/incremental/<hour>/<minute>.<node>.json"), listed from the
  // store's namespace.
  static std::set<std::string> NodesInStore(const std::string& prefix) {
    std::set<std::string> nodes;
    objectstore::S3Config config = cluster_->s3->Config();
    config.endpoint = absl::StrCat("http://127.0.0.1:", cluster_->s3->port());
    absl::Status ran = cluster_->store_ns->Run([&] {
      auto store = objectstore::S3ObjectStore::Create({.config = config, .bucket = kBucket});
      ASSERT_TRUE(store.ok()) << store.status();
      objectstore::ListOptions options;
      options.prefix = prefix;
      for (bool more = true; more;) {
        absl::StatusOr<objectstore::ListResult> listed = (*store)->List(options);
        ASSERT_TRUE(listed.ok()) << listed.status();
        for (const objectstore::ObjectEntry& object : listed->objects) {
          const std::string& key = object.key;
          if (key.find("/system/incremental/") == std::string::npos) continue;
          const size_t end = key.rfind(".json");
          const size_t dot = key.rfind('.', end - 1);
          if (end != std::string::npos && dot != std::string::npos) {
            nodes.insert(key.substr(dot + 1, end - dot - 1));
          }
        }
        more = listed->truncated;
        options.start_after = listed->next_start_after;
      }
    });
    EXPECT_TRUE(ran.ok()) << ran;
    return nodes;
  }

  static v1::DescribeTrainingJobResponse Describe(const std::string& job) {
    return DescribeJob(*Server(*cluster_), job);
  }
  static HostStatus::Value StatusOf(const v1::DescribeTrainingJobResponse& job,
                                    const std::string& host) {
    for (const auto& each : job.training_hosts()) {
      if (each.host_name() == host) return each.status();
    }
    return HostStatus::TRAINING_HOST_STATUS_UNSPECIFIED;
  }
  // Waits for `job` to reach `status`; the record it saw last.
  v1::DescribeTrainingJobResponse WaitForStatus(const std::string& job,
                                                v1::TrainingJobStatus::Value status,
                                                absl::Duration patience = absl::Seconds(90)) {
    v1::DescribeTrainingJobResponse described;
    EXPECT_TRUE(WaitUntil(
        [&] {
          described = Describe(job);
          return described.training_job_status() == status;
        },
        patience))
        << job << " is " << v1::TrainingJobStatus::Value_Name(described.training_job_status())
        << ": " << described.DebugString();
    return described;
  }
  std::string Logs() const {
    std::string logs;
    for (int i = 0; i < kHosts; ++i) {
      if (agents_[i] != nullptr) absl::StrAppend(&logs, "host", i + 1, ":\n", agents_[i]->log());
    }
    return logs;
  }

  static Cluster* cluster_;
  static absl::Status setup_;
  std::array<std::unique_ptr<AgentProcess>, kHosts> agents_;
};

Cluster* MultiHostNetnsTest::cluster_ = nullptr;
absl::Status MultiHostNetnsTest::setup_;

TEST_F(MultiHostNetnsTest, TheJobWaitsForTheLastHostWhoseNanIsFound) {
  const std::string job = "mh-wait";
  ASSERT_TRUE(CreateJob(*Server(*cluster_), Job(job)).ok());
  // Every host writes steps 0..29 of one trial; algo-1 ends at once, the
  // others hold on, and algo-3, the last to write, has a NaN at step 25.
  StartAgent(1, job, {"--steps", "30"});
  StartAgent(2, job, {"--steps", "30", "--exit-delay-ms", "4000"});
  StartAgent(3, job, {"--steps", "30", "--nan-at", "25", "--exit-delay-ms", "6000"});
  EXPECT_EQ(agents_[0]->Wait(absl::Seconds(60)), 0) << Logs();
  const v1::DescribeTrainingJobResponse waiting = Describe(job);
  EXPECT_EQ(waiting.training_job_status(), v1::TrainingJobStatus::InProgress) << Logs();
  EXPECT_EQ(StatusOf(waiting, "algo-1"), HostStatus::Completed);
  EXPECT_EQ(StatusOf(waiting, "algo-3"), HostStatus::Running);
  EXPECT_EQ(agents_[1]->Wait(absl::Seconds(60)), 0) << Logs();
  EXPECT_EQ(agents_[2]->Wait(absl::Seconds(60)), 0) << Logs();
  v1::DescribeTrainingJobResponse done = WaitForStatus(job, v1::TrainingJobStatus::Completed);
  ASSERT_EQ(done.training_hosts_size(), kHosts);
  ASSERT_TRUE(WaitUntil([&] {
    done = Describe(job);
    return done.debug_rule_evaluation_statuses(0).rule_evaluation_status() !=
           v1::RuleEvaluationStatus::InProgress;
  }, absl::Seconds(60)));
  const auto& rule = done.debug_rule_evaluation_statuses(0);
  EXPECT_EQ(rule.rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound)
      << rule.status_details();
  EXPECT_THAT(rule.status_details(), HasSubstr("step 25"));
  // Every host's system metrics went up under its own node name.
  EXPECT_EQ(NodesInStore(absl::StrCat(job, "/")),
            (std::set<std::string>{"algo-1", "algo-2", "algo-3"}));
}

TEST_F(MultiHostNetnsTest, AFailedHostFailsTheJobAndTheOthersAreStopped) {
  const std::string job = "mh-fail";
  ASSERT_TRUE(CreateJob(*Server(*cluster_), Job(job)).ok());
  // Long trainings (30 s: a leftover ends on its own), running before
  // algo-2 starts and fails.
  StartAgent(1, job, {"--steps", "1500"});
  StartAgent(3, job, {"--steps", "1500"});
  ASSERT_TRUE(WaitUntil([&] {
    const auto now = Describe(job);
    return StatusOf(now, "algo-1") == HostStatus::Running &&
           StatusOf(now, "algo-3") == HostStatus::Running;
  })) << Logs();
  StartAgent(2, job, {"--steps", "20", "--exit-code", "3"});
  EXPECT_EQ(agents_[1]->Wait(absl::Seconds(60)), 3) << Logs();
  v1::DescribeTrainingJobResponse failed = WaitForStatus(job, v1::TrainingJobStatus::Failed);
  EXPECT_THAT(failed.failure_reason(), HasSubstr("host 'algo-2' failed"));
  EXPECT_THAT(failed.failure_reason(), HasSubstr("code 3"));
  EXPECT_NE(agents_[0]->Wait(absl::Seconds(60)), -1) << Logs();
  EXPECT_NE(agents_[2]->Wait(absl::Seconds(60)), -1) << Logs();
  ASSERT_TRUE(WaitUntil([&] {
    failed = Describe(job);
    return StatusOf(failed, "algo-1") == HostStatus::Stopped &&
           StatusOf(failed, "algo-3") == HostStatus::Stopped;
  })) << failed.DebugString();
  EXPECT_EQ(failed.training_job_status(), v1::TrainingJobStatus::Failed);
}

TEST_F(MultiHostNetnsTest, AStopReachesEveryHost) {
  const std::string job = "mh-stop";
  ASSERT_TRUE(CreateJob(*Server(*cluster_), Job(job)).ok());
  for (int i = 1; i <= kHosts; ++i) StartAgent(i, job, {"--steps", "1500"});
  ASSERT_TRUE(WaitUntil([&] {
    const auto job_now = Describe(job);
    for (const char* host : {"algo-1", "algo-2", "algo-3"}) {
      if (StatusOf(job_now, host) != HostStatus::Running) return false;
    }
    return true;
  })) << Logs();
  grpc::ClientContext context;
  v1::StopTrainingJobRequest stop;
  stop.set_training_job_name(job);
  v1::StopTrainingJobResponse stopped_response;
  ASSERT_TRUE(Server(*cluster_)->StopTrainingJob(&context, stop, &stopped_response).ok());
  for (auto& agent : agents_) EXPECT_NE(agent->Wait(absl::Seconds(60)), -1) << Logs();
  const v1::DescribeTrainingJobResponse stopped =
      WaitForStatus(job, v1::TrainingJobStatus::Stopped);
  for (const char* host : {"algo-1", "algo-2", "algo-3"}) {
    EXPECT_EQ(StatusOf(stopped, host), HostStatus::Stopped) << host;
  }
}

TEST_F(MultiHostNetnsTest, AHostCutOffPastTheBoundFailsTheJobNamingIt) {
  const std::string job = "mh-cut";
  ASSERT_TRUE(CreateJob(*Server(*cluster_), Job(job)).ok());
  for (int i = 1; i <= kHosts; ++i) StartAgent(i, job, {"--steps", "1500"});
  ASSERT_TRUE(WaitUntil([&] {
    return StatusOf(Describe(job), "algo-3") == HostStatus::Running;
  })) << Logs();
  // algo-3's link to the server goes down: no FIN, no RST; the server's
  // pings find it gone.
  const std::string end = absl::StrCat("dp", getpid() % 1000000, "h3sa");
  ASSERT_TRUE(RunIp({"-n", cluster_->host_ns[2]->name(), "link", "set", end, "down"}).ok());
  const v1::DescribeTrainingJobResponse failed =
      WaitForStatus(job, v1::TrainingJobStatus::Failed, absl::Seconds(60));
  EXPECT_THAT(failed.failure_reason(), HasSubstr("host 'algo-3' lost its agent's connection"));
  // The others are stopped.
  EXPECT_NE(agents_[0]->Wait(absl::Seconds(60)), -1) << Logs();
  EXPECT_NE(agents_[1]->Wait(absl::Seconds(60)), -1) << Logs();
  // Back on the network, algo-3's agent learns the job's end and stops too.
  ASSERT_TRUE(RunIp({"-n", cluster_->host_ns[2]->name(), "link", "set", end, "up"}).ok());
  EXPECT_NE(agents_[2]->Wait(absl::Seconds(60)), -1) << Logs();
}

}  // namespace
}  // namespace debugplane
