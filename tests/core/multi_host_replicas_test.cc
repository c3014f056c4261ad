// A multi-host job served by two replicas (two job managers following one
// database's change feed; SQLite here, polled): hosts connected to
// different replicas count for one job, a host's failure reported through
// one replica stops the hosts of the other, and a replica's restart
// releases only its own hosts.

#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "core/handlers/training_agent_handler.h"
#include "core/jobs/job_hosts.h"
#include "core/manager/training_job_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "persistence/sqlite/sqlite_storage.h"
#include "tests/core/test_util.h"
#include "tests/support/wait_until.h"

namespace debugplane::core {
namespace {

using ::debugplane::testing::CallSync;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::WaitUntil;
using ::testing::HasSubstr;
using Event = v1::ReportTrainingStatusRequest;
using H = TrainingJobHandler;

class StopRecorder : public AgentDirectiveSink {
 public:
  void OnDirective(std::shared_ptr<const v1::ConnectAgentResponse> directive) override {
    if (directive->stop()) stopped_ = true;
  }
  void OnEnd(absl::Status) override {}
  bool stopped() const { return stopped_; }

 private:
  std::atomic<bool> stopped_{false};
};

struct Replica {
  std::unique_ptr<TrainingJobManager> manager;
  std::unique_ptr<TrainingAgentManager> agents;
};

class MultiHostReplicasTest : public ::testing::Test {
 protected:
  Replica Open(const std::string& id) {
    auto storage = persistence::SqliteStorage::Open((dir_.path() / "jobs.db").string());
    EXPECT_TRUE(storage.ok()) << storage.status();
    TrainingJobManagerOptions options;
    options.follow_changes = true;
    options.replica_id = id;
    options.change_poll_interval = absl::Milliseconds(20);
    options.validation.data_roots.push_back(dir_.path());
    auto manager = TrainingJobManager::Create(*std::move(storage), std::move(options));
    EXPECT_TRUE(manager.ok()) << manager.status();
    Replica replica{.manager = *std::move(manager)};
    replica.agents = std::make_unique<TrainingAgentManager>(replica.manager.get());
    return replica;
  }
  static std::unique_ptr<WatchRegistration> Connect(Replica& replica, const std::string& host,
                                                    AgentDirectiveSink* sink) {
    v1::ConnectAgentRequest request;
    request.set_training_job_name("shared");
    request.set_host(host);
    request.set_agent(absl::StrCat(host, "-machine:1"));
    auto registration = replica.agents->ConnectAgent(request, sink);
    EXPECT_TRUE(registration.ok()) << registration.status();
    return registration.ok() ? *std::move(registration) : nullptr;
  }
  static absl::Status Report(Replica& replica, const std::string& host, Event::Event event,
                             const std::string& reason = "") {
    Event request;
    request.set_training_job_name("shared");
    request.set_host(host);
    request.set_event(event);
    request.set_failure_reason(reason);
    v1::ReportTrainingStatusResponse response;
    absl::Notification done;
    absl::Status result;
    replica.agents->ReportTrainingStatus(request, &response, [&](absl::Status status) {
      result = status;
      done.Notify();
    });
    done.WaitForNotification();
    return result;
  }
  static JobRecord Describe(Replica& replica) {
    v1::DescribeTrainingJobRequest request;
    request.set_training_job_name("shared");
    auto job = CallSync<JobRecord>(*replica.manager, &H::DescribeTrainingJob, request);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : JobRecord();
  }
  static int ConnectedThrough(const JobRecord& job, const std::string& replica) {
    int count = 0;
    for (const auto& host : job.training_hosts()) {
      count += host.connected() && host.replica() == replica;
    }
    return count;
  }

  ScopedTempDir dir_;
};

TEST_F(MultiHostReplicasTest, HostsOnTwoReplicasAreOneJob) {
  Replica a = Open("a");
  Replica b = Open("b");
  v1::CreateTrainingJobRequest create = ::debugplane::testing::JobWithDebugRules("shared");
  create.mutable_resource_config()->set_instance_count(2);
  ASSERT_TRUE(CallSync<v1::CreateTrainingJobResponse>(*a.manager, &H::CreateTrainingJob, create)
                  .ok());
  StopRecorder one, two;
  auto first = Connect(a, "algo-1", &one);
  auto second = Connect(b, "algo-2", &two);
  // Either replica sees both hosts, each connected through its own.
  ASSERT_TRUE(WaitUntil([&] {
    const JobRecord job = Describe(a);
    return ConnectedThrough(job, "a") == 1 && ConnectedThrough(job, "b") == 1;
  }));
  // A name held through one replica is refused through the other.
  StopRecorder third;
  v1::ConnectAgentRequest taken;
  taken.set_training_job_name("shared");
  taken.set_host("algo-1");
  taken.set_agent("elsewhere:9");
  auto refused = b.agents->ConnectAgent(taken, &third);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(refused.status().message(), HasSubstr("replica 'a'"));

  ASSERT_TRUE(Report(a, "algo-1", Event::EVENT_STARTED).ok());
  ASSERT_TRUE(Report(b, "algo-2", Event::EVENT_STARTED).ok());
  ASSERT_TRUE(Report(b, "algo-2", Event::EVENT_FAILED, "the training command exited with code 3")
                  .ok());
  // The failure through b stops algo-1's agent on a.
  ASSERT_TRUE(WaitUntil([&] { return one.stopped(); }));
  EXPECT_THAT(Describe(a).failure_reason(), HasSubstr("host 'algo-2' failed"));

  // a restarts (its streams gone unrecorded): only its host is released.
  a.agents.reset();
  a.manager.reset();
  first.reset();
  Replica again = Open("a");
  ASSERT_TRUE(WaitUntil([&] {
    const JobRecord job = Describe(b);
    return ConnectedThrough(job, "a") == 0 && ConnectedThrough(job, "b") == 1;
  }));
  second.reset();
}

}  // namespace
}  // namespace debugplane::core
