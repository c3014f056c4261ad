// Several real debugplane-server processes (replicas) on one PostgreSQL
// database (--database) are one control plane: what is written through one
// is read, listed and watched through the others at once, an agent on one
// carries out a stop made through another, and a restart of the database
// under load loses no acknowledged write while every replica recovers.

#include <signal.h>

#include <atomic>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "debugplane/v1/profiler_report.grpc.pb.h"
#include "debugplane/v1/training_agent.grpc.pb.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"
#include "tests/persistence/postgres_test_server.h"
#include "tests/service/agent_process.h"
#include "tests/service/server_process.h"
#include "tests/service/training_job_calls.h"
#include "tests/support/wait_until.h"

namespace debugplane {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::AgentProcess;
using ::debugplane::testing::Context;
using ::debugplane::testing::CreateJob;
using ::debugplane::testing::DescribeJob;
using ::debugplane::testing::PostgresTestServer;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::debugplane::testing::WaitUntil;
using ::testing::HasSubstr;

constexpr int kReplicas = 3;

class ReplicasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto postgres = PostgresTestServer::Start();
    // A PostgreSQL that cannot start fails the test: it never skips.
    ASSERT_TRUE(postgres.ok()) << postgres.status();
    postgres_ = *std::move(postgres);
    auto database = postgres_->CreateDatabase();
    ASSERT_TRUE(database.ok()) << database.status();
    database_ = *database;
    fs::create_directories(shared_root());
    for (int i = 0; i < kReplicas; ++i) {
      // Each its own data directory; the jobs' local output in one root
      // all of them accept (as a shared file system would be).
      replicas_.push_back(std::make_unique<ServerProcess>(
          dir_.path() / absl::StrCat("replica-", i),
          std::vector<std::string>{"--database", postgres_->Uri(database_), "--replica-id",
                                   absl::StrCat("r", i), "--data-root", shared_root().string(),
                                   "--change-poll-interval", "1"}));
      ASSERT_TRUE(replicas_.back()->running());
    }
  }

  fs::path shared_root() const { return dir_.path() / "shared"; }

  v1::CreateTrainingJobRequest Job(const std::string& name) {
    return ::debugplane::testing::MinimalJob(name, shared_root() / name / "tensors");
  }

  std::unique_ptr<v1::TrainingJobService::Stub> Stub(int replica) {
    return replicas_[replica]->Stub();
  }

  grpc::Status Stop(int replica, const std::string& name) {
    v1::StopTrainingJobRequest request;
    request.set_training_job_name(name);
    v1::StopTrainingJobResponse response;
    return Stub(replica)->StopTrainingJob(Context().get(), request, &response);
  }

  ScopedTempDir dir_;
  std::unique_ptr<PostgresTestServer> postgres_;
  std::string database_;
  std::vector<std::unique_ptr<ServerProcess>> replicas_;
};

TEST_F(ReplicasTest, AJobWrittenThroughOneIsReadListedAndWatchedThroughTheOthers) {
  ASSERT_TRUE(CreateJob(*Stub(0), Job("shared-job")).ok());
  // Read-your-writes: at once, no waiting for the feed.
  for (int replica : {1, 2}) {
    v1::DescribeTrainingJobRequest describe;
    describe.set_training_job_name("shared-job");
    v1::DescribeTrainingJobResponse job;
    grpc::Status status = Stub(replica)->DescribeTrainingJob(Context().get(), describe, &job);
    ASSERT_TRUE(status.ok()) << "replica " << replica << ": " << status.error_message();
    EXPECT_EQ(job.training_job_status(), v1::TrainingJobStatus::InProgress);
    v1::ListTrainingJobsResponse listed;
    ASSERT_TRUE(Stub(replica)
                    ->ListTrainingJobs(Context().get(), v1::ListTrainingJobsRequest(), &listed)
                    .ok());
    ASSERT_EQ(listed.training_job_summaries_size(), 1);
    EXPECT_EQ(listed.training_job_summaries(0).training_job_name(), "shared-job");
  }

  // A watch through replica 1 sees a stop made through replica 2.
  auto watcher = Stub(1);
  v1::WatchTrainingJobRequest watch;
  watch.set_training_job_name("shared-job");
  auto context = Context(30);
  auto stream = watcher->WatchTrainingJob(context.get(), watch);
  v1::WatchTrainingJobResponse event;
  ASSERT_TRUE(stream->Read(&event));  // The initial state.
  EXPECT_EQ(event.training_job_status(), v1::TrainingJobStatus::InProgress);
  ASSERT_TRUE(Stop(2, "shared-job").ok());
  bool saw_stopping = false;
  while (!saw_stopping && stream->Read(&event)) {
    saw_stopping = event.training_job_status() == v1::TrainingJobStatus::Stopping ||
                   event.training_job_status() == v1::TrainingJobStatus::Stopped;
  }
  EXPECT_TRUE(saw_stopping);
  context->TryCancel();
  stream->Finish();

  // The other replicas have the stop too, and a second create of the name
  // through any of them is refused (one control plane).
  EXPECT_NE(DescribeJob(*Stub(0), "shared-job").training_job_status(),
            v1::TrainingJobStatus::InProgress);
  grpc::Status again = CreateJob(*Stub(1), Job("shared-job"));
  EXPECT_EQ(again.error_code(), grpc::StatusCode::ALREADY_EXISTS) << again.error_message();
}

TEST_F(ReplicasTest, AnAgentOnOneReplicaCarriesOutAStopMadeThroughAnother) {
  ASSERT_TRUE(CreateJob(*Stub(0), Job("agent-job")).ok());
  AgentProcess agent({"--server", replicas_[1]->address(), "--job", "agent-job", "--config-dir",
                      (dir_.path() / "agent-config").string(), "--allow-write",
                      shared_root().string(), "--stop-grace", "1"},
                     {DP_FAKE_TRAINING_BINARY, "--steps", "100000", "--step-ms", "20"},
                     dir_.path() / "agent.log");
  ASSERT_TRUE(WaitUntil([&] {
    return DescribeJob(*Stub(2), "agent-job").secondary_status() == v1::SecondaryStatus::Training;
  })) << agent.log();
  ASSERT_TRUE(Stop(0, "agent-job").ok());
  // The stop order reached the agent through replica 1's feed and watch:
  // it ended the command and reported so.
  EXPECT_NE(agent.Wait(absl::Seconds(30)), -1);
  ASSERT_TRUE(WaitUntil([&] {
    return DescribeJob(*Stub(2), "agent-job").training_job_status() ==
           v1::TrainingJobStatus::Stopped;
  })) << agent.log();
  const v1::DescribeTrainingJobResponse job = DescribeJob(*Stub(0), "agent-job");
  ASSERT_GT(job.secondary_status_transitions_size(), 0);
  // The agent's report ended the stop, not the end of a wait for one.
  EXPECT_THAT(job.secondary_status_transitions().rbegin()->status_message(),
              ::testing::Not(HasSubstr("no agent")))
      << agent.log();
}

// A ProfilerReport rule's report is written by the replica that evaluates
// the job (the lease holder) into the database, and served by every replica,
// each keeping a copy at the path it answers.
TEST_F(ReplicasTest, EveryReplicaServesTheProfilingReportWhicheverWroteIt) {
  const fs::path profiler = shared_root() / "profiled" / "profiler";
  fs::create_directories(profiler.parent_path());
  fs::copy(fs::path(DP_TEST_DATA_DIR) / "profiler" / "system" / "cpu_bottleneck", profiler,
           fs::copy_options::recursive);
  v1::CreateTrainingJobRequest request = Job("profiled");
  request.mutable_profiler_config()->set_s3_output_path("file://" + profiler.string());
  auto* rule = request.add_profiler_rule_configurations();
  rule->set_rule_configuration_name("ProfilerReport");
  rule->set_rule_evaluator_image("builtin");
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = "ProfilerReport";
  ASSERT_TRUE(CreateJob(*Stub(0), request).ok());
  v1::ReportTrainingStatusRequest end;
  end.set_training_job_name("profiled");
  end.set_event(v1::ReportTrainingStatusRequest::EVENT_COMPLETED);
  v1::ReportTrainingStatusResponse ended;
  ASSERT_TRUE(v1::TrainingAgentService::NewStub(replicas_[1]->Channel())
                  ->ReportTrainingStatus(Context().get(), end, &ended)
                  .ok());

  for (int replica = 0; replica < kReplicas; ++replica) {
    v1::GetProfilerReportResponse report;
    grpc::Status status;
    ASSERT_TRUE(WaitUntil([&] {
      v1::GetProfilerReportRequest get;
      get.set_training_job_name("profiled");
      get.set_format(v1::ProfilerReportFormat::JSON);
      report.Clear();
      status = v1::ProfilerReportService::NewStub(replicas_[replica]->Channel())
                   ->GetProfilerReport(Context().get(), get, &report);
      return status.ok() && report.final();
    })) << "replica "
        << replica << ": " << status.error_message();
    EXPECT_THAT(report.content(), HasSubstr("CPUBottleneck")) << "replica " << replica;
    // This replica's own copy, under its own data directory.
    EXPECT_THAT(report.path(), HasSubstr(absl::StrCat("replica-", replica)));
    EXPECT_TRUE(fs::exists(report.path())) << report.path();
  }
}

// Writes through all three replicas while PostgreSQL restarts: every write
// acknowledged is there afterwards, through every replica; the ones refused
// during the outage are UNAVAILABLE; every replica's feed catches up.
TEST_F(ReplicasTest, ARestartOfTheDatabaseUnderLoadLosesNoAcknowledgedWrite) {
  absl::Mutex mu;
  std::vector<std::string> created;  // Acknowledged creates.
  std::vector<std::string> stopped;  // Acknowledged stops.
  std::vector<int> created_by(kReplicas, 0);  // Acknowledged creates, by replica.
  std::vector<std::string> unexpected;
  int refused = 0;
  std::atomic<bool> done = false;
  std::vector<std::thread> writers;
  for (int replica = 0; replica < kReplicas; ++replica) {
    writers.emplace_back([&, replica] {
      auto stub = Stub(replica);
      for (int i = 0; !done.load(); ++i) {
        const std::string name = absl::StrCat("load-", replica, "-", i);
        v1::CreateTrainingJobResponse response;
        auto context = Context(10);
        grpc::Status status = stub->CreateTrainingJob(context.get(), Job(name), &response);
        if (status.ok()) {
          grpc::Status stop = Stop(replica, name);
          absl::MutexLock lock(&mu);
          created.push_back(name);
          ++created_by[replica];
          if (stop.ok()) {
            stopped.push_back(name);
          } else if (stop.error_code() == grpc::StatusCode::UNAVAILABLE) {
            ++refused;
          } else {
            unexpected.push_back(
                absl::StrCat("stop ", name, ": ", stop.error_code(), " ", stop.error_message()));
          }
          continue;
        }
        absl::MutexLock lock(&mu);
        if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
          ++refused;
        } else {
          unexpected.push_back(absl::StrCat("create ", name, ": ", status.error_code(), " ",
                                            status.error_message()));
        }
        absl::SleepFor(absl::Milliseconds(20));
      }
    });
  }
  using grpc::health::v1::HealthCheckResponse;
  auto health_of = [&](int replica) {
    auto health = grpc::health::v1::Health::NewStub(replicas_[replica]->Channel());
    grpc::health::v1::HealthCheckRequest request;
    HealthCheckResponse response;
    grpc::Status status = health->Check(Context().get(), request, &response);
    return status.ok() ? response.status() : HealthCheckResponse::UNKNOWN;
  };
  // Every replica has written more than `before[replica]` jobs, and there
  // are more than 10 in all.
  const auto every_replica_wrote = [&](const std::vector<int>& before) {
    absl::MutexLock lock(&mu);
    for (int replica = 0; replica < kReplicas; ++replica) {
      if (created_by[replica] <= before[replica]) return false;
    }
    return created.size() > 10;
  };
  const auto created_so_far = [&] {
    absl::MutexLock lock(&mu);
    return created_by;
  };
  // Load before the outage: a few writes through every replica.
  EXPECT_TRUE(WaitUntil([&] { return every_replica_wrote(std::vector<int>(kReplicas, 1)); }));
  ASSERT_TRUE(postgres_->Stop(PostgresTestServer::StopMode::kImmediate).ok());
  // Every replica says NOT_SERVING while its database is down.
  for (int replica = 0; replica < kReplicas; ++replica) {
    EXPECT_TRUE(WaitUntil([&] { return health_of(replica) == HealthCheckResponse::NOT_SERVING; },
                          absl::Seconds(10)))
        << "replica " << replica;
  }
  ASSERT_TRUE(postgres_->StartAgain().ok());
  const std::vector<int> before_recovery = created_so_far();
  for (int replica = 0; replica < kReplicas; ++replica) {
    EXPECT_TRUE(WaitUntil([&] { return health_of(replica) == HealthCheckResponse::SERVING; },
                          absl::Seconds(15)))
        << "replica " << replica;
  }
  // Load goes on until every replica writes again.
  EXPECT_TRUE(WaitUntil([&] { return every_replica_wrote(before_recovery); }));
  done = true;
  for (std::thread& writer : writers) writer.join();

  absl::MutexLock lock(&mu);
  EXPECT_THAT(unexpected, ::testing::IsEmpty());
  EXPECT_GT(refused, 0) << "the outage refused nothing: did the database stop?";
  ASSERT_GT(created.size(), 10u);
  std::set<std::string> stopped_set(stopped.begin(), stopped.end());
  for (int replica = 0; replica < kReplicas; ++replica) {
    auto stub = Stub(replica);
    for (const std::string& name : created) {
      v1::DescribeTrainingJobRequest describe;
      describe.set_training_job_name(name);
      v1::DescribeTrainingJobResponse job;
      grpc::Status status = stub->DescribeTrainingJob(Context().get(), describe, &job);
      ASSERT_TRUE(status.ok()) << "replica " << replica << " lost " << name << ": "
                               << status.error_message();
      if (stopped_set.count(name) != 0) {
        EXPECT_NE(job.training_job_status(), v1::TrainingJobStatus::InProgress)
            << "replica " << replica << " lost the stop of " << name;
      }
    }
  }
  auto stored = postgres_->Query(database_, "SELECT count(*) FROM training_jobs");
  ASSERT_TRUE(stored.ok()) << stored.status();
  // Unacknowledged creates (the outage's) may or may not be there.
  EXPECT_GE(std::stoul(*stored), created.size());
  std::cout << created.size() << " creates and " << stopped.size() << " stops acknowledged, "
            << refused << " calls refused with UNAVAILABLE during the outage\n";
}

}  // namespace
}  // namespace debugplane
