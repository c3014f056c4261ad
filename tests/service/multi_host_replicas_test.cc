// A multi-host job (InstanceCount 3) on two real debugplane-server replicas
// sharing one PostgreSQL (--database), with the hosts' agents connected to
// different replicas and light training processes (dp_fake_training): the
// job waits for every host whichever replica it reports to, and a failure
// reported through one replica stops the hosts connected to the other.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/persistence/postgres_test_server.h"
#include "tests/service/agent_process.h"
#include "tests/service/server_process.h"
#include "tests/service/training_job_calls.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/support/wait_until.h"

namespace debugplane {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::AgentProcess;
using ::debugplane::testing::CreateJob;
using ::debugplane::testing::DescribeJob;
using ::debugplane::testing::PostgresTestServer;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::debugplane::testing::WaitUntil;
using ::testing::HasSubstr;
using HostStatus = v1::TrainingHostStatus;

class MultiHostReplicasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto postgres = PostgresTestServer::Start();
    ASSERT_TRUE(postgres.ok()) << postgres.status();  // It never skips.
    postgres_ = *std::move(postgres);
    auto database = postgres_->CreateDatabase();
    ASSERT_TRUE(database.ok()) << database.status();
    fs::create_directories(shared_root());
    for (int i = 0; i < 2; ++i) {
      replicas_.push_back(std::make_unique<ServerProcess>(
          dir_.path() / absl::StrCat("replica-", i),
          std::vector<std::string>{"--database", postgres_->Uri(*database), "--replica-id",
                                   absl::StrCat("r", i), "--data-root", shared_root().string(),
                                   "--change-poll-interval", "1"}));
      ASSERT_TRUE(replicas_.back()->running());
    }
  }
  void TearDown() override {
    for (auto& agent : agents_) agent.reset();
  }

  fs::path shared_root() const { return dir_.path() / "shared"; }

  v1::CreateTrainingJobRequest Job(const std::string& name) {
    v1::CreateTrainingJobRequest request =
        ::debugplane::testing::MinimalJob(name, shared_root() / name / "tensors");
    request.mutable_resource_config()->set_instance_count(3);
    return request;
  }

  // Host algo-<i>'s agent, connected to `replica`, running dp_fake_training
  // with `training` flags.
  void StartAgent(int i, int replica, const std::string& job, std::vector<std::string> training) {
    // One trial on the shared file system, each host's worker its own rank.
    std::vector<std::string> command = {DP_FAKE_TRAINING_BINARY, "--step-ms", "20", "--rank",
                                        absl::StrCat(i - 1), "--num-workers", "3"};
    command.insert(command.end(), training.begin(), training.end());
    agents_.push_back(std::make_unique<AgentProcess>(
        std::vector<std::string>{"--server", replicas_[replica]->address(), "--job", job,
                                 "--node-id", absl::StrCat("algo-", i), "--config-dir",
                                 (dir_.path() / absl::StrCat(job, "-config-", i)).string(),
                                 "--allow-write", shared_root().string(), "--stop-grace", "1"},
        command, dir_.path() / absl::StrCat(job, "-agent-", i, ".log")));
  }

  v1::DescribeTrainingJobResponse Describe(int replica, const std::string& job) {
    return DescribeJob(*replicas_[replica]->Stub(), job);
  }
  static const v1::TrainingHost* Host(const v1::DescribeTrainingJobResponse& job,
                                      const std::string& name) {
    for (const auto& host : job.training_hosts()) {
      if (host.host_name() == name) return &host;
    }
    return nullptr;
  }
  static bool HostIs(const v1::DescribeTrainingJobResponse& job, const std::string& name,
                     HostStatus::Value status) {
    const v1::TrainingHost* host = Host(job, name);
    return host != nullptr && host->status() == status;
  }
  std::string Logs() const {
    std::string logs;
    for (const auto& agent : agents_) absl::StrAppend(&logs, agent->log(), "\n");
    return logs;
  }

  ScopedTempDir dir_;
  std::unique_ptr<PostgresTestServer> postgres_;
  std::vector<std::unique_ptr<ServerProcess>> replicas_;
  std::vector<std::unique_ptr<AgentProcess>> agents_;
};

TEST_F(MultiHostReplicasTest, TheJobWaitsForHostsOnEitherReplica) {
  ASSERT_TRUE(CreateJob(*replicas_[0]->Stub(), Job("spread")).ok());
  StartAgent(1, 0, "spread", {"--steps", "10"});
  StartAgent(2, 1, "spread", {"--steps", "10"});
  StartAgent(3, 1, "spread", {"--steps", "10", "--exit-delay-ms", "3000"});
  EXPECT_EQ(agents_[0]->Wait(absl::Seconds(60)), 0) << Logs();
  EXPECT_EQ(agents_[1]->Wait(absl::Seconds(60)), 0) << Logs();
  v1::DescribeTrainingJobResponse job;
  ASSERT_TRUE(WaitUntil([&] {
    job = Describe(0, "spread");
    return HostIs(job, "algo-1", HostStatus::Completed) &&
           HostIs(job, "algo-2", HostStatus::Completed);
  })) << job.DebugString();
  EXPECT_EQ(job.training_job_status(), v1::TrainingJobStatus::InProgress) << Logs();
  ASSERT_NE(Host(job, "algo-3"), nullptr);
  EXPECT_EQ(Host(job, "algo-3")->replica(), "r1");
  EXPECT_EQ(agents_[2]->Wait(absl::Seconds(60)), 0) << Logs();
  ASSERT_TRUE(WaitUntil([&] {
    return Describe(0, "spread").training_job_status() == v1::TrainingJobStatus::Completed;
  })) << Logs();
}

TEST_F(MultiHostReplicasTest, AFailureThroughOneReplicaStopsTheHostsOfTheOther) {
  ASSERT_TRUE(CreateJob(*replicas_[0]->Stub(), Job("broken")).ok());
  StartAgent(1, 0, "broken", {"--steps", "1500"});
  StartAgent(3, 0, "broken", {"--steps", "1500"});
  ASSERT_TRUE(WaitUntil([&] {
    const auto job = Describe(1, "broken");
    return HostIs(job, "algo-1", HostStatus::Running) && HostIs(job, "algo-3", HostStatus::Running);
  })) << Logs();
  StartAgent(2, 1, "broken", {"--steps", "20", "--exit-code", "3"});
  EXPECT_EQ(agents_[2]->Wait(absl::Seconds(60)), 3) << Logs();
  // The agents on replica 0 are told to stop through its feed.
  EXPECT_NE(agents_[0]->Wait(absl::Seconds(60)), -1) << Logs();
  EXPECT_NE(agents_[1]->Wait(absl::Seconds(60)), -1) << Logs();
  v1::DescribeTrainingJobResponse job;
  ASSERT_TRUE(WaitUntil([&] {
    job = Describe(1, "broken");
    return HostIs(job, "algo-1", HostStatus::Stopped) && HostIs(job, "algo-3", HostStatus::Stopped);
  })) << job.DebugString() << Logs();
  EXPECT_EQ(job.training_job_status(), v1::TrainingJobStatus::Failed);
  EXPECT_THAT(job.failure_reason(), HasSubstr("host 'algo-2' failed"));
}

}  // namespace
}  // namespace debugplane
