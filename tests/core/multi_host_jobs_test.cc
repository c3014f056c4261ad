// Multi-host jobs (ResourceConfig.InstanceCount > 1, one agent per host)
// through the real job manager on SQLite, its time from a base::FakeClock:
// the job's status follows every host, host names are unique, a host that
// never connects or is lost fails the job naming it, and the hosts' state
// is durable across a restart.

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "base/clock.h"
#include "core/handlers/training_agent_handler.h"
#include "core/jobs/job_hosts.h"
#include "core/manager/training_job_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/recording_agent.h"
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
using HostStatus = v1::TrainingHostStatus;

constexpr absl::Duration kConnectWait = absl::Seconds(30);
constexpr absl::Duration kReconnectWait = absl::Seconds(20);

v1::CreateTrainingJobRequest JobRequest(const std::string& name, int hosts) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/output");
  request.mutable_resource_config()->set_instance_count(hosts);
  return request;
}

using ::debugplane::testing::RecordingAgent;

// One simulated host: its agent's connection.
struct Host {
  std::string name;
  RecordingAgent agent;
  std::unique_ptr<WatchRegistration> registration;
};

class MultiHostJobsTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }

  void Open() {
    TrainingJobManagerOptions options;
    options.clock = clock_;
    options.host_wait = {.connect = kConnectWait, .reconnect = kReconnectWait};
    auto manager = ::debugplane::testing::OpenTestManager(dir_.path(), options);
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *std::move(manager);
    agents_ = std::make_unique<TrainingAgentManager>(manager_.get());
  }
  // Restarts the manager on the same database and clock, as a crash
  // would: the agents' streams end with the old manager, unrecorded.
  void Reopen() {
    agents_.reset();
    manager_.reset();
    for (auto& host : hosts_) host->registration.reset();
    Open();
  }

  void Create(const v1::CreateTrainingJobRequest& request) {
    auto created =
        CallSync<v1::CreateTrainingJobResponse>(*manager_, &H::CreateTrainingJob, request);
    ASSERT_TRUE(created.ok()) << created.status();
  }
  JobRecord Describe(const std::string& name) {
    v1::DescribeTrainingJobRequest request;
    request.set_training_job_name(name);
    auto job = CallSync<JobRecord>(*manager_, &H::DescribeTrainingJob, request);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : JobRecord();
  }
  absl::StatusOr<std::unique_ptr<WatchRegistration>> ConnectAs(const std::string& job,
                                                              const std::string& host,
                                                              const std::string& agent_id,
                                                              RecordingAgent* agent) {
    v1::ConnectAgentRequest request;
    request.set_training_job_name(job);
    request.set_host(host);
    request.set_agent(agent_id);
    return agents_->ConnectAgent(request, agent);
  }
  // Connects algo-1..algo-<count> to `job`.
  void ConnectHosts(const std::string& job, int count) {
    for (int i = 1; i <= count; ++i) {
      auto host = std::make_unique<Host>();
      host->name = absl::StrCat("algo-", i);
      auto registration = ConnectAs(job, host->name, absl::StrCat("machine-", i, ":100"),
                                    &host->agent);
      ASSERT_TRUE(registration.ok()) << registration.status();
      host->registration = *std::move(registration);
      hosts_.push_back(std::move(host));
    }
    ASSERT_TRUE(WaitUntil([&] { return ConnectedHosts(job) == count; }));
  }
  int ConnectedHosts(const std::string& job) {
    int connected = 0;
    const JobRecord record = Describe(job);
    for (const auto& host : record.training_hosts()) connected += host.connected();
    return connected;
  }
  absl::StatusOr<v1::ReportTrainingStatusResponse> Report(const std::string& job,
                                                          const std::string& host,
                                                          Event::Event event,
                                                          const std::string& message = "") {
    v1::ReportTrainingStatusRequest request;
    request.set_training_job_name(job);
    request.set_host(host);
    request.set_event(event);
    if (event == Event::EVENT_STOPPED) request.set_status_message(message);
    if (event == Event::EVENT_FAILED) request.set_failure_reason(message);
    v1::ReportTrainingStatusResponse response;
    absl::Notification done;
    absl::Status result;
    agents_->ReportTrainingStatus(request, &response, [&](absl::Status status) {
      result = status;
      done.Notify();
    });
    done.WaitForNotification();
    if (!result.ok()) return result;
    return response;
  }
  void StartAll(const std::string& job) {
    for (const auto& host : hosts_) {
      auto started = Report(job, host->name, Event::EVENT_STARTED);
      ASSERT_TRUE(started.ok()) << started.status();
      EXPECT_EQ(started->training_job_status(), v1::TrainingJobStatus::InProgress);
    }
  }
  JobRecord WaitForStatus(const std::string& name, JobStatus status) {
    JobRecord job;
    if (WaitUntil([&] {
          job = Describe(name);
          return job.training_job_status() == status;
        })) {
      return job;
    }
    ADD_FAILURE() << name << " never reached " << JobStatusName(status);
    return job;
  }
  // Real time for the deadline thread to act on what the clock made due.
  void Settle() { absl::SleepFor(absl::Milliseconds(50)); }

  static HostStatus::Value StatusOf(const JobRecord& job, const std::string& host) {
    const v1::TrainingHost* found = FindHost(job, host);
    return found == nullptr ? HostStatus::TRAINING_HOST_STATUS_UNSPECIFIED : found->status();
  }

  std::shared_ptr<base::FakeClock> clock_ = std::make_shared<base::FakeClock>();
  ScopedTempDir dir_;
  std::unique_ptr<TrainingJobManager> manager_;
  std::unique_ptr<TrainingAgentManager> agents_;
  std::vector<std::unique_ptr<Host>> hosts_;
};

TEST_F(MultiHostJobsTest, CompletedOnlyOnceEveryHostExitedZero) {
  Create(JobRequest("three", 3));
  ConnectHosts("three", 3);
  StartAll("three");
  JobRecord job = Describe("three");
  EXPECT_EQ(job.secondary_status(), v1::SecondaryStatus::Training);
  EXPECT_EQ(StatusOf(job, "algo-2"), HostStatus::Running);

  ASSERT_TRUE(Report("three", "algo-1", Event::EVENT_COMPLETED).ok());
  auto second = Report("three", "algo-3", Event::EVENT_COMPLETED);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->training_job_status(), v1::TrainingJobStatus::InProgress);
  job = Describe("three");
  EXPECT_EQ(StatusOf(job, "algo-1"), HostStatus::Completed);
  EXPECT_EQ(StatusOf(job, "algo-2"), HostStatus::Running);

  auto last = Report("three", "algo-2", Event::EVENT_COMPLETED);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->training_job_status(), v1::TrainingJobStatus::Completed);
}

TEST_F(MultiHostJobsTest, TheFirstFailureFailsTheJobNamingTheHostAndStopsTheOthers) {
  Create(JobRequest("failing", 3));
  ConnectHosts("failing", 3);
  StartAll("failing");
  ASSERT_TRUE(Report("failing", "algo-1", Event::EVENT_COMPLETED).ok());
  auto failed =
      Report("failing", "algo-2", Event::EVENT_FAILED, "the training command exited with code 3");
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->training_job_status(), v1::TrainingJobStatus::Failed);
  JobRecord job = Describe("failing");
  EXPECT_EQ(job.failure_reason(),
            "host 'algo-2' failed: the training command exited with code 3");
  // The hosts still running are told to stop.
  ASSERT_TRUE(WaitUntil([&] {
    auto directive = hosts_[2]->agent.last();
    return directive != nullptr && directive->stop();
  }));
  EXPECT_THAT(hosts_[2]->agent.last()->stop_reason(), HasSubstr("host 'algo-2' failed"));
  ASSERT_TRUE(Report("failing", "algo-3", Event::EVENT_STOPPED, "exited after SIGTERM").ok());
  job = Describe("failing");
  EXPECT_EQ(job.training_job_status(), v1::TrainingJobStatus::Failed);
  EXPECT_EQ(StatusOf(job, "algo-3"), HostStatus::Stopped);
  EXPECT_EQ(StatusOf(job, "algo-1"), HostStatus::Completed);
}

TEST_F(MultiHostJobsTest, AStopReachesEveryHostAndEndsOnceNoCommandRuns) {
  Create(JobRequest("stopped", 3));
  ConnectHosts("stopped", 3);
  StartAll("stopped");
  v1::StopTrainingJobRequest stop;
  stop.set_training_job_name("stopped");
  ASSERT_TRUE(
      CallSync<v1::StopTrainingJobResponse>(*manager_, &H::StopTrainingJob, stop).ok());
  for (const auto& host : hosts_) {
    ASSERT_TRUE(WaitUntil([&] {
      auto directive = host->agent.last();
      return directive != nullptr && directive->stop();
    })) << host->name;
  }
  ASSERT_TRUE(Report("stopped", "algo-1", Event::EVENT_STOPPED, "gone").ok());
  ASSERT_TRUE(Report("stopped", "algo-2", Event::EVENT_COMPLETED).ok());
  EXPECT_EQ(Describe("stopped").training_job_status(), v1::TrainingJobStatus::Stopping);
  auto last = Report("stopped", "algo-3", Event::EVENT_STOPPED, "gone");
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->training_job_status(), v1::TrainingJobStatus::Stopped);
  const JobRecord job = Describe("stopped");
  EXPECT_THAT(job.secondary_status_transitions().rbegin()->status_message(),
              HasSubstr("last reported by algo-3"));
}

TEST_F(MultiHostJobsTest, ATakenHostNameIsRefusedNamingItsHolder) {
  Create(JobRequest("names", 2));
  ConnectHosts("names", 1);
  RecordingAgent second;
  auto taken = ConnectAs("names", "algo-1", "other-machine:7", &second);
  ASSERT_EQ(taken.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(taken.status().message(), HasSubstr("held by agent 'machine-1:100'"));
  // The same agent reconnecting (its stream broke) takes its name back.
  RecordingAgent again;
  auto same = ConnectAs("names", "algo-1", "machine-1:100", &again);
  ASSERT_TRUE(same.ok()) << same.status();
  auto two = ConnectAs("names", "algo-2", "machine-2:1", &second);
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_TRUE(WaitUntil([&] { return Describe("names").training_hosts_size() == 2; }));
  RecordingAgent third;
  auto extra = ConnectAs("names", "algo-3", "machine-3:1", &third);
  ASSERT_EQ(extra.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(extra.status().message(), HasSubstr("expects 2 hosts"));
  // A report without its host cannot be placed.
  auto anonymous = Report("names", "", Event::EVENT_STARTED);
  ASSERT_EQ(anonymous.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(anonymous.status().message(), HasSubstr("Host"));
}

TEST_F(MultiHostJobsTest, AnAgentBackBeforeItsOldStreamEndedStaysConnected) {
  Create(JobRequest("twice", 2));
  ConnectHosts("twice", 1);
  RecordingAgent again;
  auto second = ConnectAs("twice", "algo-1", "machine-1:100", &again);
  ASSERT_TRUE(second.ok()) << second.status();
  hosts_[0]->registration.reset();  // The old stream ends only now.
  Settle();
  const JobRecord job = Describe("twice");
  ASSERT_EQ(job.training_hosts_size(), 1);
  EXPECT_TRUE(job.training_hosts(0).connected());
}

TEST_F(MultiHostJobsTest, AHostThatNeverConnectsFailsTheJobNamingIt) {
  Create(JobRequest("missing", 3));
  ConnectHosts("missing", 2);
  StartAll("missing");
  clock_->Advance(kConnectWait - absl::Seconds(1));
  Settle();
  EXPECT_EQ(Describe("missing").training_job_status(), v1::TrainingJobStatus::InProgress);
  clock_->Advance(absl::Seconds(1));
  const JobRecord job = WaitForStatus("missing", v1::TrainingJobStatus::Failed);
  EXPECT_THAT(job.failure_reason(), HasSubstr("only 2 of the 3 hosts"));
  EXPECT_THAT(job.failure_reason(), HasSubstr("missing: algo-3"));
  ASSERT_TRUE(WaitUntil([&] {
    auto directive = hosts_[0]->agent.last();
    return directive != nullptr && directive->stop();
  }));
}

TEST_F(MultiHostJobsTest, AHostLostPastTheBoundFailsTheJobNamingIt) {
  Create(JobRequest("lost", 3));
  ConnectHosts("lost", 3);
  StartAll("lost");
  hosts_[1]->registration.reset();  // algo-2's stream ends.
  ASSERT_TRUE(WaitUntil([&] { return ConnectedHosts("lost") == 2; }));
  clock_->Advance(kReconnectWait - absl::Seconds(1));
  Settle();
  EXPECT_EQ(Describe("lost").training_job_status(), v1::TrainingJobStatus::InProgress);
  clock_->Advance(absl::Seconds(1));
  const JobRecord job = WaitForStatus("lost", v1::TrainingJobStatus::Failed);
  EXPECT_THAT(job.failure_reason(), HasSubstr("host 'algo-2' lost its agent's connection"));
}

TEST_F(MultiHostJobsTest, AHostThatComesBackInTimeKeepsTheJobGoing) {
  Create(JobRequest("blip", 2));
  ConnectHosts("blip", 2);
  StartAll("blip");
  hosts_[0]->registration.reset();
  ASSERT_TRUE(WaitUntil([&] { return ConnectedHosts("blip") == 1; }));
  clock_->Advance(kReconnectWait - absl::Seconds(5));
  auto back = ConnectAs("blip", "algo-1", "machine-1:100", &hosts_[0]->agent);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(WaitUntil([&] { return ConnectedHosts("blip") == 2; }));
  clock_->Advance(kReconnectWait);
  Settle();
  EXPECT_EQ(Describe("blip").training_job_status(), v1::TrainingJobStatus::InProgress);
}

TEST_F(MultiHostJobsTest, HostsAreDurableAndARestartStartsTheirReconnectWait) {
  Create(JobRequest("durable", 2));
  ConnectHosts("durable", 2);
  StartAll("durable");
  ASSERT_TRUE(Report("durable", "algo-1", Event::EVENT_COMPLETED).ok());
  Reopen();
  ASSERT_TRUE(WaitUntil([&] { return ConnectedHosts("durable") == 0; }));
  JobRecord job = Describe("durable");
  EXPECT_EQ(StatusOf(job, "algo-1"), HostStatus::Completed);
  EXPECT_EQ(StatusOf(job, "algo-2"), HostStatus::Running);
  clock_->Advance(kReconnectWait);
  job = WaitForStatus("durable", v1::TrainingJobStatus::Failed);
  EXPECT_THAT(job.failure_reason(), HasSubstr("host 'algo-2'"));
}

TEST_F(MultiHostJobsTest, AOneHostJobFollowsItsAgentAsBefore) {
  Create(JobRequest("single", 0));
  RecordingAgent agent;
  v1::ConnectAgentRequest request;
  request.set_training_job_name("single");
  auto registration = agents_->ConnectAgent(request, &agent);
  ASSERT_TRUE(registration.ok()) << registration.status();
  ASSERT_TRUE(Report("single", "", Event::EVENT_STARTED).ok());
  auto failed = Report("single", "", Event::EVENT_FAILED, "the training command exited with code 1");
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->training_job_status(), v1::TrainingJobStatus::Failed);
  const JobRecord job = Describe("single");
  EXPECT_EQ(job.failure_reason(), "the training command exited with code 1");
  ASSERT_EQ(job.training_hosts_size(), 1);
  EXPECT_EQ(job.training_hosts(0).status(), HostStatus::Failed);
  // No stop order for a one-host job that ended.
  EXPECT_FALSE(agent.last()->stop());
}

}  // namespace
}  // namespace debugplane::core
