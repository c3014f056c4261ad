// Several job managers on one database (replicas): each follows the change
// feed of the others, its writes carry the versions they were computed
// against, and a conflict re-runs the call's mutation on the newer state.
// Two managers share one SQLite file here (each with its own connection),
// polled rather than notified; tests/service/replicas_test.cc runs real
// servers on PostgreSQL.

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "core/manager/training_job_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "persistence/fault_injecting_storage.h"
#include "persistence/sqlite/sqlite_storage.h"
#include "tests/core/test_util.h"

namespace debugplane::core {
namespace {

using ::debugplane::testing::CallSync;
using ::debugplane::testing::ScopedTempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;
using H = TrainingJobHandler;

v1::CreateTrainingJobRequest JobRequest(const std::string& name) {
  return ::debugplane::testing::JobWithDebugRules(name);
}

template <typename Request>
Request Named(const std::string& name) {
  Request request;
  request.set_training_job_name(name);
  return request;
}

// Counts the commits observers hear, per job.
class ObservedCommits {
 public:
  TrainingJobManager::CommitObserver Observer() {
    return [this](const std::string& name, std::shared_ptr<const JobRecord> job) {
      absl::MutexLock lock(&mu_);
      heard_.push_back(absl::StrCat(
          name, ":", job == nullptr ? "deleted" : JobStatusName(job->training_job_status())));
    };
  }
  std::vector<std::string> heard() {
    absl::MutexLock lock(&mu_);
    return heard_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> heard_ ABSL_GUARDED_BY(mu_);
};

// Records the statuses a watcher is told, and its end.
class StatusWatcher : public JobWatcher {
 public:
  void OnEvent(std::shared_ptr<const v1::WatchTrainingJobResponse> event) override {
    absl::MutexLock lock(&mu_);
    statuses_.push_back(std::string(JobStatusName(event->training_job_status())));
  }
  void OnEnd(absl::Status status) override { ended_.Notify(); }
  // Blocks until the watcher was told `status` (OnEvent wakes it, no
  // polling); false after 10 s.
  bool Saw(const std::string& status) {
    absl::MutexLock lock(&mu_);
    const auto told = [&] {
      mu_.AssertHeld();
      return std::find(statuses_.begin(), statuses_.end(), status) != statuses_.end();
    };
    return mu_.AwaitWithTimeout(absl::Condition(&told), absl::Seconds(10));
  }
  bool WaitForEnd() { return ended_.WaitForNotificationWithTimeout(absl::Seconds(10)); }

 private:
  absl::Mutex mu_;
  std::vector<std::string> statuses_ ABSL_GUARDED_BY(mu_);
  absl::Notification ended_;
};

absl::Status Call(absl::AnyInvocable<void(DoneCallback)> call) {
  absl::Notification done;
  absl::Status result;
  call([&](absl::Status status) {
    result = std::move(status);
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

class ReplicaFeedTest : public ::testing::Test {
 protected:
  // The training process started: a stop then waits for its agent.
  static void ReportStarted(TrainingJobManager& manager, const std::string& name) {
    v1::ReportTrainingStatusRequest started = Named<v1::ReportTrainingStatusRequest>(name);
    started.set_event(v1::ReportTrainingStatusRequest::EVENT_STARTED);
    v1::ReportTrainingStatusResponse response;
    ASSERT_TRUE(Call([&](DoneCallback done) {
                  manager.ReportTrainingStatus(started, &response, std::move(done));
                }).ok());
  }

  std::string db() const { return (dir_.path() / "jobs.db").string(); }

  std::unique_ptr<TrainingJobManager> OpenReplica(
      const std::string& id, absl::Duration poll_interval,
      persistence::FaultInjectingStorage** faults = nullptr) {
    auto sqlite = persistence::SqliteStorage::Open(db());
    EXPECT_TRUE(sqlite.ok()) << sqlite.status();
    if (!sqlite.ok()) return nullptr;
    auto storage = std::make_unique<persistence::FaultInjectingStorage>(*std::move(sqlite));
    if (faults != nullptr) *faults = storage.get();
    TrainingJobManagerOptions options;
    options.follow_changes = true;
    options.replica_id = id;
    options.change_poll_interval = poll_interval;
    options.max_conflict_retries = 3;
    options.validation.data_roots.push_back(dir_.path());
    auto manager = TrainingJobManager::Create(std::move(storage), std::move(options));
    EXPECT_TRUE(manager.ok()) << manager.status();
    return manager.ok() ? *std::move(manager) : nullptr;
  }

  ScopedTempDir dir_;
};

TEST_F(ReplicaFeedTest, ChangesOfOneServerReachTheOtherInOrderOnceEach) {
  auto a = OpenReplica("a", absl::Hours(1));
  auto b = OpenReplica("b", absl::Milliseconds(50));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ObservedCommits heard_by_a, heard_by_b;
  a->AddCommitObserver(heard_by_a.Observer());
  b->AddCommitObserver(heard_by_b.Observer());

  ASSERT_TRUE(
      (CallSync<v1::CreateTrainingJobResponse>(*a, &H::CreateTrainingJob, JobRequest("job"))).ok());
  ReportStarted(*a, "job");
  // Read-your-writes: B catches up before it answers, no waiting for a poll.
  auto described = CallSync<v1::DescribeTrainingJobResponse>(
      *b, &H::DescribeTrainingJob, Named<v1::DescribeTrainingJobRequest>("job"));
  ASSERT_TRUE(described.ok()) << described.status();
  EXPECT_EQ(described->training_job_status(), v1::TrainingJobStatus::InProgress);
  auto listed = CallSync<v1::ListTrainingJobsResponse>(*b, &H::ListTrainingJobs,
                                                       v1::ListTrainingJobsRequest());
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->training_job_summaries_size(), 1);

  // A watch on B hears a stop made through A (the feed, polled by B).
  StatusWatcher watcher;
  auto registration = b->WatchTrainingJob(Named<v1::WatchTrainingJobRequest>("job"), &watcher);
  ASSERT_TRUE(registration.ok()) << registration.status();
  ASSERT_TRUE((CallSync<v1::StopTrainingJobResponse>(*a, &H::StopTrainingJob,
                                                     Named<v1::StopTrainingJobRequest>("job")))
                  .ok());
  EXPECT_TRUE(watcher.Saw("Stopping"));
  // B keeps the stop's deadline too: either server ends the wait.
  EXPECT_TRUE(b->PendingDeadline("job").has_value());

  v1::ReportTrainingStatusRequest exited = Named<v1::ReportTrainingStatusRequest>("job");
  exited.set_event(v1::ReportTrainingStatusRequest::EVENT_STOPPED);
  v1::ReportTrainingStatusResponse reported;
  ASSERT_TRUE(Call([&](DoneCallback done) {
                a->ReportTrainingStatus(exited, &reported, std::move(done));
              }).ok());
  EXPECT_TRUE(watcher.Saw("Stopped"));
  EXPECT_TRUE(watcher.WaitForEnd());
  ASSERT_TRUE((CallSync<v1::DeleteTrainingJobResponse>(*a, &H::DeleteTrainingJob,
                                                       Named<v1::DeleteTrainingJobRequest>("job")))
                  .ok());
  // The tombstone: B forgets the job.
  EXPECT_EQ(CallSync<v1::DescribeTrainingJobResponse>(*b, &H::DescribeTrainingJob,
                                                      Named<v1::DescribeTrainingJobRequest>("job"))
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_FALSE(b->PendingDeadline("job").has_value());

  // Each server's observers heard every change once, in order: A its own
  // (not again from the feed), B A's from the feed.
  const std::vector<std::string> all = {"job:InProgress", "job:InProgress", "job:Stopping",
                                        "job:Stopped", "job:deleted"};
  EXPECT_EQ(heard_by_a.heard(), all);
  EXPECT_EQ(heard_by_b.heard(), all);
  EXPECT_EQ(b->feed_stats().applied, 5);
  EXPECT_EQ(a->feed_stats().applied, 0);
}

// A stale server's write fails its version check, and its mutation runs
// again on the newer state: both changes survive (no lost update).
TEST_F(ReplicaFeedTest, AConflictRunsTheMutationAgainOnTheNewerState) {
  auto a = OpenReplica("a", absl::Hours(1));
  auto b = OpenReplica("b", absl::Hours(1));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(
      (CallSync<v1::CreateTrainingJobResponse>(*a, &H::CreateTrainingJob, JobRequest("job"))).ok());
  ReportStarted(*a, "job");
  ASSERT_TRUE(b->CatchUpNow(absl::Seconds(10)).ok());
  ASSERT_NE(b->GetJob("job"), nullptr);

  // A changes one rule; B, which has not read the feed since, another.
  ASSERT_TRUE(Call([&](DoneCallback done) {
                a->SetRuleEvaluationStatus("job", "VanishingGradient",
                                           v1::RuleEvaluationStatus::IssuesFound, "found",
                                           std::move(done));
              }).ok());
  ASSERT_TRUE(Call([&](DoneCallback done) {
                b->SetRuleEvaluationStatus("job", "ExplodingTensor",
                                           v1::RuleEvaluationStatus::NoIssuesFound, "",
                                           std::move(done));
              }).ok());
  EXPECT_EQ(b->feed_stats().conflicts, 1);
  for (TrainingJobManager* manager : {a.get(), b.get()}) {
    ASSERT_TRUE(manager->CatchUpNow(absl::Seconds(10)).ok());
    auto job = manager->GetJob("job");
    ASSERT_NE(job, nullptr);
    ASSERT_EQ(job->debug_rule_evaluation_statuses_size(), 2);
    EXPECT_EQ(job->debug_rule_evaluation_statuses(0).rule_evaluation_status(),
              v1::RuleEvaluationStatus::IssuesFound);
    EXPECT_EQ(job->debug_rule_evaluation_statuses(1).rule_evaluation_status(),
              v1::RuleEvaluationStatus::NoIssuesFound);
  }

  // A re-run may also decide that nothing is left to do: B's stale stop
  // after A's stop is a no-op, not an error.
  ASSERT_TRUE((CallSync<v1::StopTrainingJobResponse>(*a, &H::StopTrainingJob,
                                                     Named<v1::StopTrainingJobRequest>("job")))
                  .ok());
  const int64_t conflicts = b->feed_stats().conflicts;
  // B's memory still has InProgress: it writes, conflicts, reads the feed.
  ASSERT_TRUE((CallSync<v1::StopTrainingJobResponse>(*b, &H::StopTrainingJob,
                                                     Named<v1::StopTrainingJobRequest>("job")))
                  .ok());
  EXPECT_EQ(b->feed_stats().conflicts, conflicts + 1);
  EXPECT_EQ(b->GetJob("job")->training_job_status(), v1::TrainingJobStatus::Stopping);
}

// An agent reporting through replica B on a job created through replica A a
// moment ago (B's feed not read since, its poll an hour away): B reads the
// feed before answering NOT_FOUND, so the report lands.
TEST_F(ReplicaFeedTest, AChangeOfAJobThisReplicaHasNotReadYetReadsTheFeedFirst) {
  auto a = OpenReplica("a", absl::Hours(1));
  auto b = OpenReplica("b", absl::Hours(1));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(
      (CallSync<v1::CreateTrainingJobResponse>(*a, &H::CreateTrainingJob, JobRequest("job"))).ok());
  ASSERT_EQ(b->GetJob("job"), nullptr);

  ReportStarted(*b, "job");
  ASSERT_NE(b->GetJob("job"), nullptr);
  ASSERT_TRUE(a->CatchUpNow(absl::Seconds(10)).ok());
  EXPECT_EQ(a->GetJob("job")->secondary_status(), b->GetJob("job")->secondary_status());

  // A job no replica created is still NOT_FOUND, after the read.
  v1::ReportTrainingStatusRequest unknown = Named<v1::ReportTrainingStatusRequest>("no-such-job");
  unknown.set_event(v1::ReportTrainingStatusRequest::EVENT_STARTED);
  v1::ReportTrainingStatusResponse response;
  EXPECT_TRUE(absl::IsNotFound(Call([&](DoneCallback done) {
    b->ReportTrainingStatus(unknown, &response, std::move(done));
  })));
}

TEST_F(ReplicaFeedTest, ConflictsBeyondTheLimitFailTheCallWithAbortedNamingTheJob) {
  persistence::FaultInjectingStorage* faults = nullptr;
  auto a = OpenReplica("a", absl::Hours(1), &faults);
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(
      (CallSync<v1::CreateTrainingJobResponse>(*a, &H::CreateTrainingJob, JobRequest("job"))).ok());
  const int writes_before = faults->write_calls();
  faults->FailWrites(persistence::VersionConflictError("job", 1, 2));
  auto stopped = CallSync<v1::StopTrainingJobResponse>(*a, &H::StopTrainingJob,
                                                       Named<v1::StopTrainingJobRequest>("job"));
  EXPECT_EQ(stopped.status().code(), absl::StatusCode::kAborted) << stopped.status();
  EXPECT_THAT(stopped.status().message(),
              AllOf(HasSubstr("training job 'job'"), HasSubstr("4 attempts")));
  // The first attempt and max_conflict_retries (3) more.
  EXPECT_EQ(faults->write_calls() - writes_before, 4);
  faults->Heal();
  EXPECT_EQ(a->GetJob("job")->training_job_status(), v1::TrainingJobStatus::InProgress);
  EXPECT_TRUE((CallSync<v1::StopTrainingJobResponse>(*a, &H::StopTrainingJob,
                                                     Named<v1::StopTrainingJobRequest>("job")))
                  .ok());
}

TEST_F(ReplicaFeedTest, ReadsFailWithUnavailableWhileTheFeedCannotBeRead) {
  persistence::FaultInjectingStorage* faults = nullptr;
  auto a = OpenReplica("a", absl::Hours(1), &faults);
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(
      (CallSync<v1::CreateTrainingJobResponse>(*a, &H::CreateTrainingJob, JobRequest("job"))).ok());
  faults->FailReads(absl::UnavailableError("database at 10.0.0.1:5432 is down"));
  auto described = CallSync<v1::DescribeTrainingJobResponse>(
      *a, &H::DescribeTrainingJob, Named<v1::DescribeTrainingJobRequest>("job"));
  EXPECT_EQ(described.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(described.status().message(),
              AllOf(HasSubstr("change feed"), HasSubstr("10.0.0.1:5432 is down")));
  EXPECT_FALSE(a->feed_stats().storage_reachable);
  faults->Heal();
  EXPECT_TRUE((CallSync<v1::DescribeTrainingJobResponse>(
                   *a, &H::DescribeTrainingJob, Named<v1::DescribeTrainingJobRequest>("job")))
                  .ok());
  EXPECT_TRUE(a->feed_stats().storage_reachable);
}

}  // namespace
}  // namespace debugplane::core
