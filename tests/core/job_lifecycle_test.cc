// The job manager's deadlines, driven by a base::FakeClock: a stop is complete only
// once the agent reports the training process gone (or the bounded wait for
// that ends), MaxRuntimeInSeconds stops a job, and both survive restarts.

#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "base/clock.h"
#include "core/handlers/training_agent_handler.h"
#include "core/jobs/validation_text.h"
#include "core/manager/training_job_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "persistence/sqlite/sqlite_storage.h"
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

constexpr absl::Duration kWithoutAgent = absl::Seconds(10);
constexpr absl::Duration kForAgent = absl::Minutes(5);

v1::CreateTrainingJobRequest JobRequest(const std::string& name, int max_runtime_s = 0) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/output");
  request.mutable_debug_hook_config()->set_s3_output_path("s3://bucket/debug-output");
  auto* rule = request.add_debug_rule_configurations();
  rule->set_rule_configuration_name("LossNotDecreasing");
  rule->set_rule_evaluator_image("builtin");
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = "LossNotDecreasing";
  if (max_runtime_s > 0) {
    request.mutable_stopping_condition()->set_max_runtime_in_seconds(max_runtime_s);
  }
  return request;
}

using ::debugplane::testing::RecordingAgent;

class JobLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }

  void Open() {
    TrainingJobManagerOptions options;
    options.clock = clock_;
    options.stop_wait = {.without_agent = kWithoutAgent, .for_agent = kForAgent};
    auto manager = ::debugplane::testing::OpenTestManager(dir_.path(), options);
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *std::move(manager);
    agents_ = std::make_unique<TrainingAgentManager>(manager_.get());
  }
  // Restarts the manager on the same database (and the same clock).
  void Reopen() {
    agents_.reset();
    manager_.reset();
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
  absl::Status Stop(const std::string& name) {
    v1::StopTrainingJobRequest request;
    request.set_training_job_name(name);
    return CallSync<v1::StopTrainingJobResponse>(*manager_, &H::StopTrainingJob, request).status();
  }
  absl::StatusOr<v1::ReportTrainingStatusResponse> Report(const std::string& name,
                                                          Event::Event event,
                                                          const std::string& message = "") {
    v1::ReportTrainingStatusRequest request;
    request.set_training_job_name(name);
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
  std::unique_ptr<WatchRegistration> Connect(const std::string& name, RecordingAgent* agent) {
    v1::ConnectAgentRequest request;
    request.set_training_job_name(name);
    auto registration = agents_->ConnectAgent(request, agent);
    EXPECT_TRUE(registration.ok()) << registration.status();
    return registration.ok() ? *std::move(registration) : nullptr;
  }
  // Waits (real time, bounded) for the deadline thread and the committer to
  // apply what the clock made due.
  JobRecord WaitForStatus(const std::string& name, JobStatus status) {
    JobRecord job;
    if (WaitUntil([&] {
          job = Describe(name);
          return job.training_job_status() == status;
        })) {
      return job;
    }
    ADD_FAILURE() << name << " never reached " << JobStatusName(status) << "; it is "
                  << JobStatusName(Describe(name).training_job_status());
    return {};
  }
  // Lets the deadline thread look at the clock; what it does then is
  // committed before the next call's completion (one queue). Real time, on
  // purpose: the tests call it where the clock is short of every deadline,
  // so a correct timer does nothing there and leaves nothing to wait on;
  // 50 ms give a wrong early stop the time to land.
  void Settle() { absl::SleepFor(absl::Milliseconds(50)); }

  static std::string LastTransitionMessage(const JobRecord& job) {
    return job.secondary_status_transitions().empty()
               ? ""
               : job.secondary_status_transitions().rbegin()->status_message();
  }

  std::shared_ptr<base::FakeClock> clock_ = std::make_shared<base::FakeClock>();
  ScopedTempDir dir_;
  std::unique_ptr<TrainingJobManager> manager_;
  std::unique_ptr<TrainingAgentManager> agents_;
};

TEST_F(JobLifecycleTest, WithNoAgentConnectedAStopWaitsForOneThenSaysSo) {
  Create(JobRequest("orphan"));
  ASSERT_TRUE(Report("orphan", Event::EVENT_STARTED).ok());
  const absl::Time ordered = clock_->Now();
  ASSERT_TRUE(Stop("orphan").ok());
  EXPECT_EQ(manager_->PendingDeadline("orphan"), ordered + kWithoutAgent);

  clock_->Advance(kWithoutAgent - absl::Seconds(1));
  Settle();
  EXPECT_EQ(Describe("orphan").training_job_status(), v1::TrainingJobStatus::Stopping);

  clock_->Advance(absl::Seconds(1));
  JobRecord job = WaitForStatus("orphan", v1::TrainingJobStatus::Stopped);
  EXPECT_EQ(job.secondary_status(), v1::SecondaryStatus::Stopped);
  EXPECT_THAT(LastTransitionMessage(job),
              HasSubstr("no agent was connected to stop the training process"));
  EXPECT_EQ(ToAbslTime(job.training_end_time()), ordered + kWithoutAgent);
  EXPECT_EQ(job.debug_rule_evaluation_statuses(0).rule_evaluation_status(),
            v1::RuleEvaluationStatus::Stopped);
  EXPECT_FALSE(manager_->PendingDeadline("orphan").has_value());
}

TEST_F(JobLifecycleTest, ARuleActionStopGoesThroughTheSameWait) {
  Create(JobRequest("ruled"));
  ASSERT_TRUE(Report("ruled", Event::EVENT_STARTED).ok());
  absl::Notification stopped;
  manager_->StopTrainingJobWithReason("ruled", "Stopped by rule X (StopTraining action)",
                                      [&](absl::Status status) {
                                        EXPECT_TRUE(status.ok()) << status;
                                        stopped.Notify();
                                      });
  stopped.WaitForNotification();
  Settle();
  EXPECT_EQ(Describe("ruled").training_job_status(), v1::TrainingJobStatus::Stopping);
  clock_->Advance(kWithoutAgent);
  JobRecord job = WaitForStatus("ruled", v1::TrainingJobStatus::Stopped);
  EXPECT_THAT(LastTransitionMessage(job), HasSubstr("no agent was connected"));
}

TEST_F(JobLifecycleTest, WithAnAgentConnectedTheStopEndsWhenTheAgentReportsTheExit) {
  Create(JobRequest("watched"));
  RecordingAgent agent;
  auto connection = Connect("watched", &agent);
  ASSERT_TRUE(Report("watched", Event::EVENT_STARTED).ok());
  ASSERT_TRUE(Stop("watched").ok());
  // The agent gets the order; the job waits for it well past the
  // reconnect wait.
  ASSERT_TRUE(agent.last()->stop());
  EXPECT_EQ(agent.last()->training_job_status(), v1::TrainingJobStatus::Stopping);
  clock_->Advance(kWithoutAgent * 6);
  Settle();
  EXPECT_EQ(Describe("watched").training_job_status(), v1::TrainingJobStatus::Stopping);

  const std::string how =
      "the training command exited with code 0 after SIGTERM (signal 15), 0.4 s after the stop "
      "order";
  auto reported = Report("watched", Event::EVENT_STOPPED, how);
  ASSERT_TRUE(reported.ok()) << reported.status();
  EXPECT_EQ(reported->training_job_status(), v1::TrainingJobStatus::Stopped);
  JobRecord job = Describe("watched");
  EXPECT_EQ(job.secondary_status(), v1::SecondaryStatus::Stopped);
  EXPECT_EQ(LastTransitionMessage(job), how);
  EXPECT_EQ(agent.last()->training_job_status(), v1::TrainingJobStatus::Stopped);
  EXPECT_TRUE(agent.ended());
  // A late or repeated report changes nothing.
  EXPECT_EQ(Report("watched", Event::EVENT_STOPPED, "again")->training_job_status(),
            v1::TrainingJobStatus::Stopped);
  EXPECT_EQ(LastTransitionMessage(Describe("watched")), how);
}

TEST_F(JobLifecycleTest, AConnectedAgentThatNeverConfirmsIsGivenUpOnAfterTheConfirmBound) {
  Create(JobRequest("hung"));
  RecordingAgent agent;
  auto connection = Connect("hung", &agent);
  ASSERT_TRUE(Report("hung", Event::EVENT_STARTED).ok());
  const absl::Time ordered = clock_->Now();
  ASSERT_TRUE(Stop("hung").ok());
  EXPECT_EQ(manager_->PendingDeadline("hung"), ordered + kForAgent);
  clock_->Advance(kForAgent - absl::Seconds(1));
  Settle();
  EXPECT_EQ(Describe("hung").training_job_status(), v1::TrainingJobStatus::Stopping);
  clock_->Advance(absl::Seconds(1));
  JobRecord job = WaitForStatus("hung", v1::TrainingJobStatus::Stopped);
  EXPECT_THAT(LastTransitionMessage(job), HasSubstr("the agent did not confirm within 5m"));
}

TEST_F(JobLifecycleTest, AnAgentLeavingDuringAStopStartsTheReconnectWait) {
  Create(JobRequest("dropped"));
  RecordingAgent agent;
  auto connection = Connect("dropped", &agent);
  ASSERT_TRUE(Report("dropped", Event::EVENT_STARTED).ok());
  ASSERT_TRUE(Stop("dropped").ok());
  clock_->Advance(absl::Seconds(30));
  connection.reset();  // The stream broke.
  EXPECT_EQ(manager_->PendingDeadline("dropped"), clock_->Now() + kWithoutAgent);
  // Another agent (or the same, reconnected) comes back and reports.
  RecordingAgent again;
  auto reconnected = Connect("dropped", &again);
  EXPECT_TRUE(again.last()->stop());
  EXPECT_EQ(manager_->PendingDeadline("dropped"), clock_->Now() - absl::Seconds(30) + kForAgent);
  reconnected.reset();
  clock_->Advance(kWithoutAgent);
  JobRecord job = WaitForStatus("dropped", v1::TrainingJobStatus::Stopped);
  EXPECT_THAT(LastTransitionMessage(job), HasSubstr("no agent was connected"));
}

TEST_F(JobLifecycleTest, AJobThatNeverStartedIsStoppedAtOnceAndCannotStartWhileStopping) {
  Create(JobRequest("idle"));
  ASSERT_TRUE(Stop("idle").ok());
  JobRecord job = WaitForStatus("idle", v1::TrainingJobStatus::Stopped);
  EXPECT_THAT(LastTransitionMessage(job), HasSubstr("the training had not started"));

  // With an agent connected the stop waits for it; its start is refused.
  Create(JobRequest("starting"));
  RecordingAgent agent;
  auto connection = Connect("starting", &agent);
  ASSERT_TRUE(Stop("starting").ok());
  auto started = Report("starting", Event::EVENT_STARTED);
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ(started->training_job_status(), v1::TrainingJobStatus::Stopping);
  EXPECT_FALSE(Describe("starting").has_training_start_time());
  auto stopped = Report("starting", Event::EVENT_STOPPED, "the training command was not started");
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(stopped->training_job_status(), v1::TrainingJobStatus::Stopped);
}

TEST_F(JobLifecycleTest, AnEndReportedWhileStoppingCompletesTheStopAndStoppedNeedsAStop) {
  Create(JobRequest("raced"));
  RecordingAgent agent;
  auto connection = Connect("raced", &agent);
  ASSERT_TRUE(Report("raced", Event::EVENT_STARTED).ok());
  EXPECT_EQ(Report("raced", Event::EVENT_STOPPED, "x").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Report("raced", Event::EVENT_STOPPED, "x").status().message(),
              HasSubstr("'raced' is InProgress"));
  ASSERT_TRUE(Stop("raced").ok());
  auto completed = Report("raced", Event::EVENT_COMPLETED);
  ASSERT_TRUE(completed.ok()) << completed.status();
  EXPECT_EQ(completed->training_job_status(), v1::TrainingJobStatus::Stopped);
  JobRecord job = Describe("raced");
  EXPECT_THAT(LastTransitionMessage(job), HasSubstr("exited with code 0 when the stop order"));
  EXPECT_FALSE(job.has_model_artifacts());
}

// An agent's texts are cut to 1,024 characters wherever they are kept
// (FailureReason, the transitions' StatusMessage), between characters, so a
// 4 MB FailureReason leaves a record every reply can carry.
TEST_F(JobLifecycleTest, AnAgentsTextsAreBoundedWhereverTheyAreStored) {
  const std::string huge(4'000'000, 'x');
  // Two-byte characters: the cut must not split one.
  std::string wide;
  for (int i = 0; i < 600'000; ++i) wide += "\u00e9";
  const auto expect_bounded = [](const JobRecord& job) {
    EXPECT_LE(CharCount(job.failure_reason()), kMaxStatusTextChars);
    for (const auto& transition : job.secondary_status_transitions()) {
      EXPECT_LE(CharCount(transition.status_message()), kMaxStatusTextChars);
    }
    EXPECT_LT(job.ByteSizeLong(), 64u * 1024) << job.training_job_name();
  };

  Create(JobRequest("failed"));
  ASSERT_TRUE(Report("failed", Event::EVENT_STARTED).ok());
  ASSERT_TRUE(Report("failed", Event::EVENT_FAILED, huge).ok());
  JobRecord failed = Describe("failed");
  EXPECT_EQ(failed.training_job_status(), v1::TrainingJobStatus::Failed);
  EXPECT_EQ(failed.failure_reason(), huge.substr(0, kMaxStatusTextChars));
  EXPECT_EQ(LastTransitionMessage(failed), huge.substr(0, kMaxStatusTextChars));
  expect_bounded(failed);

  Create(JobRequest("wide"));
  ASSERT_TRUE(Report("wide", Event::EVENT_FAILED, wide).ok());
  JobRecord wide_job = Describe("wide");
  EXPECT_EQ(wide_job.failure_reason(), wide.substr(0, 2 * kMaxStatusTextChars));
  expect_bounded(wide_job);

  // Failed while Stopping completes the stop with the reason in the
  // transition; and EVENT_STOPPED's StatusMessage.
  for (const auto event : {Event::EVENT_FAILED, Event::EVENT_STOPPED}) {
    const std::string name = event == Event::EVENT_FAILED ? "raced-fail" : "stopped";
    Create(JobRequest(name));
    RecordingAgent agent;
    auto connection = Connect(name, &agent);
    ASSERT_TRUE(Report(name, Event::EVENT_STARTED).ok());
    ASSERT_TRUE(Stop(name).ok());
    ASSERT_TRUE(Report(name, event, huge).ok());
    JobRecord stopped = Describe(name);
    EXPECT_EQ(stopped.training_job_status(), v1::TrainingJobStatus::Stopped) << name;
    EXPECT_THAT(LastTransitionMessage(stopped), ::testing::StartsWith("xxxx")) << name;
    expect_bounded(stopped);
  }
}

// A record an older version stored with an agent's whole text (it kept a
// 4 MB FailureReason in the transition) is served cut after a restart,
// instead of failing every Describe of the job with RESOURCE_EXHAUSTED.
TEST_F(JobLifecycleTest, AnOldRecordsOversizedTextsAreCutWhenLoaded) {
  Create(JobRequest("old"));
  agents_.reset();
  manager_.reset();
  {
    auto storage = persistence::SqliteStorage::Open((dir_.path() / "jobs.db").string());
    ASSERT_TRUE(storage.ok()) << storage.status();
    absl::StatusOr<std::optional<persistence::JobRow>> row = (*storage)->ReadJob("old");
    ASSERT_TRUE(row.ok() && row->has_value()) << row.status();
    JobRecord poisoned;
    ASSERT_TRUE(poisoned.ParseFromString((*row)->record));
    const std::string huge(4'000'000, 'x');
    poisoned.set_failure_reason(huge);
    poisoned.add_secondary_status_transitions()->set_status_message(huge);
    poisoned.mutable_debug_rule_evaluation_statuses(0)->set_status_details(huge);
    persistence::JobRow stored = **row;
    stored.record = poisoned.SerializeAsString();
    persistence::WriteBatch batch;
    batch.Put(std::move(stored));
    ASSERT_TRUE((*storage)->Write(batch).ok());
  }
  Open();
  JobRecord loaded = Describe("old");
  EXPECT_EQ(loaded.training_job_name(), "old");
  EXPECT_EQ(loaded.failure_reason(), std::string(kMaxStatusTextChars, 'x'));
  EXPECT_EQ(LastTransitionMessage(loaded), std::string(kMaxStatusTextChars, 'x'));
  EXPECT_LT(loaded.ByteSizeLong(), 64u * 1024);
}

TEST_F(JobLifecycleTest, AStopResumesWaitingAfterARestart) {
  Create(JobRequest("resumed"));
  ASSERT_TRUE(Report("resumed", Event::EVENT_STARTED).ok());
  ASSERT_TRUE(Stop("resumed").ok());
  clock_->Advance(absl::Seconds(8));
  Reopen();
  // Not completed at once: agents get the reconnect wait from the restart.
  EXPECT_EQ(Describe("resumed").training_job_status(), v1::TrainingJobStatus::Stopping);
  EXPECT_EQ(manager_->PendingDeadline("resumed"), clock_->Now() + kWithoutAgent);
  RecordingAgent agent;
  auto connection = Connect("resumed", &agent);
  EXPECT_TRUE(agent.last()->stop());
  auto reported = Report("resumed", Event::EVENT_STOPPED, "the training command was killed");
  ASSERT_TRUE(reported.ok()) << reported.status();
  EXPECT_EQ(reported->training_job_status(), v1::TrainingJobStatus::Stopped);
  // Disconnected before the manager it is registered with is replaced below
  // (destroying it later would unregister from a deleted manager).
  connection.reset();

  // And without an agent, it ends after that wait.
  Create(JobRequest("resumed-alone"));
  ASSERT_TRUE(Report("resumed-alone", Event::EVENT_STARTED).ok());
  ASSERT_TRUE(Stop("resumed-alone").ok());
  Reopen();
  clock_->Advance(kWithoutAgent - absl::Seconds(1));
  Settle();
  EXPECT_EQ(Describe("resumed-alone").training_job_status(), v1::TrainingJobStatus::Stopping);
  clock_->Advance(absl::Seconds(1));
  WaitForStatus("resumed-alone", v1::TrainingJobStatus::Stopped);
}

TEST_F(JobLifecycleTest, MaxRuntimeStopsTheJobThroughTheAgent) {
  const absl::Time created = clock_->Now();
  Create(JobRequest("limited", /*max_runtime_s=*/3));
  EXPECT_EQ(manager_->PendingDeadline("limited"), created + absl::Seconds(3));
  RecordingAgent agent;
  auto connection = Connect("limited", &agent);
  clock_->Advance(absl::Seconds(1));
  // Counted from the training's start once it started.
  ASSERT_TRUE(Report("limited", Event::EVENT_STARTED).ok());
  EXPECT_EQ(manager_->PendingDeadline("limited"), created + absl::Seconds(4));
  clock_->Advance(absl::Seconds(2));
  Settle();
  EXPECT_EQ(Describe("limited").training_job_status(), v1::TrainingJobStatus::InProgress);

  clock_->Advance(absl::Seconds(1));
  JobRecord job = WaitForStatus("limited", v1::TrainingJobStatus::Stopping);
  EXPECT_EQ(job.secondary_status(), v1::SecondaryStatus::Stopping);
  EXPECT_EQ(job.failure_reason(), "Training job exceeded MaxRuntimeInSeconds of 3 s");
  // The agent is told to stop, with the reason (delivered on the watch
  // thread, after the status above is committed).
  WaitUntil([&] { return agent.last()->stop(); });
  ASSERT_TRUE(agent.last()->stop());
  EXPECT_EQ(agent.last()->stop_reason(), "Training job exceeded MaxRuntimeInSeconds of 3 s");

  ASSERT_TRUE(Report("limited", Event::EVENT_STOPPED, "the training command was killed").ok());
  job = Describe("limited");
  EXPECT_EQ(job.training_job_status(), v1::TrainingJobStatus::Stopped);
  EXPECT_EQ(job.secondary_status(), v1::SecondaryStatus::MaxRuntimeExceeded);
  EXPECT_EQ(job.failure_reason(), "Training job exceeded MaxRuntimeInSeconds of 3 s");
  EXPECT_EQ(LastTransitionMessage(job), "the training command was killed");
  EXPECT_EQ(job.training_time_in_seconds(), 3);
}

TEST_F(JobLifecycleTest, MaxRuntimeDeadlinesSurviveARestart) {
  const absl::Time created = clock_->Now();
  Create(JobRequest("durable", /*max_runtime_s=*/100));
  ASSERT_TRUE(Report("durable", Event::EVENT_STARTED).ok());
  Reopen();
  EXPECT_EQ(manager_->PendingDeadline("durable"), created + absl::Seconds(100));
  clock_->Advance(absl::Seconds(100));
  WaitForStatus("durable", v1::TrainingJobStatus::Stopping);
}

TEST_F(JobLifecycleTest, AMaxRuntimeThatPassedWhileTheServerWasDownFiresAtStart) {
  Create(JobRequest("overdue", /*max_runtime_s=*/5));
  ASSERT_TRUE(Report("overdue", Event::EVENT_STARTED).ok());
  agents_.reset();
  manager_.reset();
  clock_->Advance(absl::Minutes(1));
  Open();
  JobRecord job = WaitForStatus("overdue", v1::TrainingJobStatus::Stopping);
  EXPECT_EQ(job.failure_reason(), "Training job exceeded MaxRuntimeInSeconds of 5 s");
  // No agent is connected: the reconnect wait, then MaxRuntimeExceeded.
  clock_->Advance(kWithoutAgent);
  job = WaitForStatus("overdue", v1::TrainingJobStatus::Stopped);
  EXPECT_EQ(job.secondary_status(), v1::SecondaryStatus::MaxRuntimeExceeded);
}

TEST_F(JobLifecycleTest, AJobThatNeverStartsRunsOutOfTimeFromItsCreation) {
  Create(JobRequest("waiting", /*max_runtime_s=*/60));
  clock_->Advance(absl::Seconds(60));
  JobRecord job = WaitForStatus("waiting", v1::TrainingJobStatus::Stopped);
  EXPECT_EQ(job.secondary_status(), v1::SecondaryStatus::MaxRuntimeExceeded);
  EXPECT_EQ(job.failure_reason(), "Training job exceeded MaxRuntimeInSeconds of 60 s");
  EXPECT_THAT(LastTransitionMessage(job), HasSubstr("the training had not started"));
}

TEST_F(JobLifecycleTest, ModelArtifactsAppearOnlyOnceTrainingCompleted) {
  Create(JobRequest("artifacts"));
  EXPECT_FALSE(Describe("artifacts").has_model_artifacts());
  ASSERT_TRUE(Report("artifacts", Event::EVENT_STARTED).ok());
  EXPECT_FALSE(Describe("artifacts").has_model_artifacts());
  ASSERT_TRUE(Report("artifacts", Event::EVENT_COMPLETED).ok());
  EXPECT_EQ(Describe("artifacts").model_artifacts().s3_model_artifacts(),
            "s3://bucket/output/artifacts/output/model.tar.gz");
  EXPECT_FALSE(manager_->PendingDeadline("artifacts").has_value());

  Create(JobRequest("broken"));
  ASSERT_TRUE(
      Report("broken", Event::EVENT_FAILED, "the training command exited with code 1").ok());
  EXPECT_FALSE(Describe("broken").has_model_artifacts());
}

}  // namespace
}  // namespace debugplane::core
