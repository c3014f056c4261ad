#include "core/manager/training_job_manager.h"

#include <atomic>
#include <filesystem>
#include <numeric>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "core/handlers/training_agent_handler.h"
#include "core/jobs/field_violations.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "persistence/fault_injecting_storage.h"
#include "persistence/sqlite/sqlite_storage.h"
#include "tests/core/test_util.h"
#include "tests/support/wait_until.h"

namespace debugplane::core {
namespace {

using ::debugplane::testing::CallSync;
using ::debugplane::testing::ScopedTempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using H = TrainingJobHandler;

v1::CreateTrainingJobRequest JobRequest(const std::string& name, int debug_rules = 2,
                                        int profiler_rules = 1) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_algorithm_specification()->set_training_input_mode("File");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/output");
  request.mutable_debug_hook_config()->set_s3_output_path("s3://bucket/debug-output");
  const char* debug_names[] = {"VanishingGradient", "ExplodingTensor", "LossNotDecreasing"};
  for (int i = 0; i < debug_rules; ++i) {
    auto* rule = request.add_debug_rule_configurations();
    rule->set_rule_configuration_name(debug_names[i % 3] + std::to_string(i));
    rule->set_rule_evaluator_image("builtin");
    (*rule->mutable_rule_parameters())["rule_to_invoke"] = debug_names[i % 3];
  }
  for (int i = 0; i < profiler_rules; ++i) {
    auto* rule = request.add_profiler_rule_configurations();
    rule->set_rule_configuration_name("ProfilerReport" + std::to_string(i));
    rule->set_rule_evaluator_image(
        "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest");
    (*rule->mutable_rule_parameters())["rule_to_invoke"] = "ProfilerReport";
  }
  return request;
}

// Records every watch callback.
class RecordingWatcher : public JobWatcher {
 public:
  void OnEvent(std::shared_ptr<const v1::WatchTrainingJobResponse> event) override {
    absl::MutexLock lock(&mu_);
    events_.push_back(std::move(event));
  }
  void OnEnd(absl::Status status) override {
    absl::MutexLock lock(&mu_);
    end_ = status;
    ended_.Notify();
  }
  absl::Status WaitForEnd() {
    EXPECT_TRUE(ended_.WaitForNotificationWithTimeout(absl::Seconds(10)));
    absl::MutexLock lock(&mu_);
    return end_;
  }
  std::vector<std::shared_ptr<const v1::WatchTrainingJobResponse>> events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  bool ended() const { return ended_.HasBeenNotified(); }

 private:
  absl::Mutex mu_;
  std::vector<std::shared_ptr<const v1::WatchTrainingJobResponse>> events_ ABSL_GUARDED_BY(mu_);
  absl::Status end_ ABSL_GUARDED_BY(mu_);
  absl::Notification ended_;
};

v1::WatchTrainingJobRequest WatchRequest(const std::string& name) {
  v1::WatchTrainingJobRequest request;
  request.set_training_job_name(name);
  return request;
}

// The completion of one asynchronous call: its status and the thread it ran on.
class CallResult {
 public:
  DoneCallback Callback() {
    return [this](absl::Status status) {
      status_ = std::move(status);
      thread_ = std::this_thread::get_id();
      done_.Notify();
    };
  }
  bool WaitForCompletion(absl::Duration timeout) {
    return done_.WaitForNotificationWithTimeout(timeout);
  }
  bool done() const { return done_.HasBeenNotified(); }
  // REQUIRES: done().
  const absl::Status& status() const { return status_; }
  std::thread::id thread() const { return thread_; }

 private:
  absl::Status status_;
  std::thread::id thread_;
  absl::Notification done_;
};

// Blocks in every OnEvent after the initial state until released.
class BlockingWatcher : public RecordingWatcher {
 public:
  void OnEvent(std::shared_ptr<const v1::WatchTrainingJobResponse> event) override {
    const bool initial = event->changes(0).kind() == v1::StatusChange::KIND_INITIAL_STATE;
    RecordingWatcher::OnEvent(std::move(event));
    if (initial) return;
    // Callbacks of one watcher are serialized: only this thread notifies.
    if (!blocked_.HasBeenNotified()) blocked_.Notify();
    release_.WaitForNotification();
  }
  bool WaitUntilBlocked(absl::Duration timeout) {
    return blocked_.WaitForNotificationWithTimeout(timeout);
  }
  void Release() { release_.Notify(); }

 private:
  absl::Notification blocked_;
  absl::Notification release_;
};

// Records the training step of every record it is given, taking `delay`
// over each.
class StepRecorder : public JobWatcher {
 public:
  explicit StepRecorder(absl::Duration delay) : delay_(delay) {}
  void OnRecord(std::shared_ptr<const v1::DescribeTrainingJobResponse> job) override {
    absl::SleepFor(delay_);
    absl::MutexLock lock(&mu_);
    steps_.push_back(job->progress_info().current_step());
  }
  void OnEvent(std::shared_ptr<const v1::WatchTrainingJobResponse>) override {}
  void OnEnd(absl::Status) override {}
  std::vector<int64_t> steps() {
    absl::MutexLock lock(&mu_);
    return steps_;
  }

 private:
  const absl::Duration delay_;
  absl::Mutex mu_;
  std::vector<int64_t> steps_ ABSL_GUARDED_BY(mu_);
};

class TrainingJobManagerTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }

  void Open() {
    auto sqlite = persistence::SqliteStorage::Open((dir_.path() / "jobs.db").string());
    ASSERT_TRUE(sqlite.ok()) << sqlite.status();
    auto faulty = std::make_unique<persistence::FaultInjectingStorage>(*std::move(sqlite));
    storage_ = faulty.get();
    TrainingJobManagerOptions options;
    options.validation.data_roots.push_back(dir_.path());
    options.watch_delivery_threads = watch_delivery_threads_;
    auto manager = TrainingJobManager::Create(std::move(faulty), std::move(options));
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *std::move(manager);
  }

  void Reopen() {
    manager_.reset();
    Open();
  }

  absl::StatusOr<v1::CreateTrainingJobResponse> Create(const v1::CreateTrainingJobRequest& r) {
    return CallSync<v1::CreateTrainingJobResponse>(*manager_, &H::CreateTrainingJob, r);
  }
  absl::StatusOr<v1::DescribeTrainingJobResponse> Describe(const std::string& name) {
    v1::DescribeTrainingJobRequest request;
    request.set_training_job_name(name);
    return CallSync<v1::DescribeTrainingJobResponse>(*manager_, &H::DescribeTrainingJob, request);
  }
  absl::Status Stop(const std::string& name) {
    v1::StopTrainingJobRequest request;
    request.set_training_job_name(name);
    return CallSync<v1::StopTrainingJobResponse>(*manager_, &H::StopTrainingJob, request).status();
  }
  absl::Status Delete(const std::string& name) {
    v1::DeleteTrainingJobRequest request;
    request.set_training_job_name(name);
    return CallSync<v1::DeleteTrainingJobResponse>(*manager_, &H::DeleteTrainingJob, request)
        .status();
  }
  absl::StatusOr<v1::ListTrainingJobsResponse> List(const v1::ListTrainingJobsRequest& r) {
    return CallSync<v1::ListTrainingJobsResponse>(*manager_, &H::ListTrainingJobs, r);
  }
  absl::StatusOr<v1::UpdateTrainingJobResponse> Update(const v1::UpdateTrainingJobRequest& r) {
    return CallSync<v1::UpdateTrainingJobResponse>(*manager_, &H::UpdateTrainingJob, r);
  }
  // Waits until the job reaches `status` (the second half of a stop runs on
  // the committer thread).
  v1::DescribeTrainingJobResponse WaitForStatus(const std::string& name, JobStatus status) {
    absl::StatusOr<v1::DescribeTrainingJobResponse> job;
    if (::debugplane::testing::WaitUntil([&] {
          job = Describe(name);
          return job.ok() && job->training_job_status() == status;
        })) {
      return *job;
    }
    ADD_FAILURE() << name << " never reached " << JobStatusName(status);
    return {};
  }

  ScopedTempDir dir_;
  int watch_delivery_threads_ = TrainingJobManagerOptions().watch_delivery_threads;
  persistence::FaultInjectingStorage* storage_ = nullptr;
  std::unique_ptr<TrainingJobManager> manager_;
};

TEST_F(TrainingJobManagerTest, CreateThenDescribeReturnsTheJobAsSageMakerDoes) {
  auto created = Create(JobRequest("job-1"));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->training_job_arn(), "arn:aws:sagemaker:local:000000000000:training-job/job-1");

  auto job = Describe("job-1");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->training_job_status(), v1::TrainingJobStatus::InProgress);
  EXPECT_EQ(job->secondary_status(), v1::SecondaryStatus::Starting);
  ASSERT_EQ(job->secondary_status_transitions_size(), 1);
  EXPECT_TRUE(job->secondary_status_transitions(0).has_start_time());
  EXPECT_TRUE(job->has_creation_time());
  EXPECT_TRUE(job->has_last_modified_time());
  EXPECT_EQ(job->profiling_status(), v1::ProfilingStatus::Enabled);
  EXPECT_EQ(job->profiler_config().profiling_interval_in_milliseconds(), 500);
  EXPECT_EQ(job->config_version(), 1);
  ASSERT_EQ(job->debug_rule_evaluation_statuses_size(), 2);
  ASSERT_EQ(job->profiler_rule_evaluation_statuses_size(), 1);
  for (const auto& rule : job->debug_rule_evaluation_statuses()) {
    EXPECT_EQ(rule.rule_evaluation_status(), v1::RuleEvaluationStatus::InProgress);
    EXPECT_THAT(rule.rule_evaluation_job_arn(),
                HasSubstr("arn:aws:sagemaker:local:000000000000:processing-job/job-1-"));
    EXPECT_TRUE(rule.has_last_modified_time());
  }
  EXPECT_EQ(job->debug_rule_evaluation_statuses(0).rule_configuration_name(), "VanishingGradient0");
}

TEST_F(TrainingJobManagerTest, DuplicateNameIsAlreadyExists) {
  ASSERT_TRUE(Create(JobRequest("dup")).ok());
  auto again = Create(JobRequest("dup"));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.status().message(), HasSubstr("dup"));
}

TEST_F(TrainingJobManagerTest, InvalidRequestNamesTheField) {
  auto request = JobRequest("bad_name!");
  auto created = Create(request);
  ASSERT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  auto violations = FieldViolationsOf(created.status());
  ASSERT_FALSE(violations.empty());
  EXPECT_EQ(violations[0].field, "TrainingJobName");
  EXPECT_EQ(Describe("bad_name!").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TrainingJobManagerTest, UnknownJobIsNotFound) {
  EXPECT_EQ(Describe("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Stop("nope").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Delete("nope").code(), absl::StatusCode::kNotFound);
}

TEST_F(TrainingJobManagerTest, StopGoesThroughStoppingToStoppedWithRules) {
  ASSERT_TRUE(Create(JobRequest("s")).ok());
  ASSERT_TRUE(Stop("s").ok());
  auto job = WaitForStatus("s", v1::TrainingJobStatus::Stopped);
  EXPECT_EQ(job.secondary_status(), v1::SecondaryStatus::Stopped);
  std::vector<SecondaryStatus> seen;
  for (const auto& t : job.secondary_status_transitions()) seen.push_back(t.status());
  EXPECT_THAT(seen, ElementsAre(v1::SecondaryStatus::Starting, v1::SecondaryStatus::Stopping,
                                v1::SecondaryStatus::Stopped));
  // Every transition but the current one has an end time.
  EXPECT_TRUE(job.secondary_status_transitions(0).has_end_time());
  EXPECT_TRUE(job.secondary_status_transitions(1).has_end_time());
  EXPECT_FALSE(job.secondary_status_transitions(2).has_end_time());
  EXPECT_TRUE(job.has_training_end_time());
  for (const auto& rule : job.debug_rule_evaluation_statuses()) {
    EXPECT_EQ(rule.rule_evaluation_status(), v1::RuleEvaluationStatus::Stopped);
  }
  // Stopping again is a no-op that succeeds, as in SageMaker.
  EXPECT_TRUE(Stop("s").ok());
}

TEST_F(TrainingJobManagerTest, UpdateChangesProfilingOnlyWhileInProgress) {
  ASSERT_TRUE(Create(JobRequest("u")).ok());
  v1::UpdateTrainingJobRequest update;
  update.set_training_job_name("u");
  update.mutable_profiler_config()->set_profiling_interval_in_milliseconds(100);
  (*update.mutable_profiler_config()->mutable_profiling_parameters())["DetailedProfilingConfig"] =
      R"({"StartStep": 5, "NumSteps": 3})";
  auto* rule = update.add_profiler_rule_configurations();
  rule->set_rule_configuration_name("CPU");
  rule->set_rule_evaluator_image("builtin");
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = "CPUBottleneck";
  ASSERT_TRUE(Update(update).ok());

  auto job = Describe("u");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->config_version(), 2);
  EXPECT_EQ(job->profiler_config().profiling_interval_in_milliseconds(), 100);
  EXPECT_EQ(job->profiler_config().profiling_parameters().at("DetailedProfilingConfig"),
            R"({"StartStep": 5, "NumSteps": 3})");
  ASSERT_EQ(job->profiler_rule_evaluation_statuses_size(), 2);
  EXPECT_EQ(job->profiler_rule_evaluation_statuses(1).rule_configuration_name(), "CPU");
  EXPECT_EQ(job->profiler_rule_evaluation_statuses(1).rule_evaluation_status(),
            v1::RuleEvaluationStatus::InProgress);

  // Same rule name again: refused, naming the field.
  update.clear_profiler_config();
  auto duplicate = Update(update);
  ASSERT_EQ(duplicate.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FieldViolationsOf(duplicate.status())[0].field,
            "ProfilerRuleConfigurations[0].RuleConfigurationName");

  v1::UpdateTrainingJobRequest disable;
  disable.set_training_job_name("u");
  disable.mutable_profiler_config()->set_disable_profiler(true);
  ASSERT_TRUE(Update(disable).ok());
  EXPECT_EQ(Describe("u")->profiling_status(), v1::ProfilingStatus::Disabled);
  EXPECT_EQ(Describe("u")->config_version(), 3);
  // Every accepted update is recorded.
  auto updated = Describe("u");
  ASSERT_EQ(updated->configuration_updates_size(), 2);
  EXPECT_EQ(updated->configuration_updates(0).config_version(), 2);
  EXPECT_EQ(
      updated->configuration_updates(0).profiler_config().profiling_interval_in_milliseconds(),
      100);
  EXPECT_THAT(updated->configuration_updates(0).added_profiler_rules(), ElementsAre("CPU"));
  EXPECT_EQ(updated->configuration_updates(1).config_version(), 3);
  EXPECT_TRUE(updated->configuration_updates(1).profiler_config().disable_profiler());

  ASSERT_TRUE(Stop("u").ok());
  WaitForStatus("u", v1::TrainingJobStatus::Stopped);
  EXPECT_EQ(Update(disable).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(TrainingJobManagerTest, UpdateRefusesMoreThanTwentyProfilerRules) {
  ASSERT_TRUE(Create(JobRequest("many", 0, 19)).ok());
  v1::UpdateTrainingJobRequest update;
  update.set_training_job_name("many");
  for (int i = 0; i < 2; ++i) {
    auto* rule = update.add_profiler_rule_configurations();
    rule->set_rule_configuration_name("extra" + std::to_string(i));
    rule->set_rule_evaluator_image("builtin");
    (*rule->mutable_rule_parameters())["rule_to_invoke"] = "StepOutlier";
  }
  auto result = Update(update);
  ASSERT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("21"));
  update.mutable_profiler_rule_configurations()->RemoveLast();
  EXPECT_TRUE(Update(update).ok());
}

TEST_F(TrainingJobManagerTest, DeleteOnlyTerminalJobsAndNameBecomesFree) {
  ASSERT_TRUE(Create(JobRequest("d")).ok());
  EXPECT_EQ(Delete("d").code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(Stop("d").ok());
  WaitForStatus("d", v1::TrainingJobStatus::Stopped);
  ASSERT_TRUE(Delete("d").ok());
  EXPECT_EQ(Describe("d").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Create(JobRequest("d")).ok());
}

TEST_F(TrainingJobManagerTest, EverythingAcknowledgedSurvivesARestart) {
  ASSERT_TRUE(Create(JobRequest("keep-1")).ok());
  ASSERT_TRUE(Create(JobRequest("keep-2")).ok());
  ASSERT_TRUE(Stop("keep-2").ok());
  WaitForStatus("keep-2", v1::TrainingJobStatus::Stopped);
  auto before = Describe("keep-1");
  ASSERT_TRUE(before.ok());
  Reopen();
  auto after = Describe("keep-1");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->SerializeAsString(), before->SerializeAsString());
  EXPECT_EQ(Describe("keep-2")->training_job_status(), v1::TrainingJobStatus::Stopped);
  EXPECT_EQ(manager_->job_count(), 2u);
}

TEST_F(TrainingJobManagerTest, AStopInterruptedByACrashCompletesAtStart) {
  ASSERT_TRUE(Create(JobRequest("half")).ok());
  ASSERT_TRUE(Stop("half").ok());
  // Simulate a crash between the Stopping and Stopped commits: put the
  // Stopping state back on disk directly, then start again. The training
  // never started, so there is no process to wait for (a started one waits
  // for its agent: job_lifecycle_test.cc).
  auto job = WaitForStatus("half", v1::TrainingJobStatus::Stopped);
  manager_.reset();
  {
    auto sqlite = persistence::SqliteStorage::Open((dir_.path() / "jobs.db").string());
    ASSERT_TRUE(sqlite.ok());
    JobRecord stopping = job;
    stopping.set_training_job_status(v1::TrainingJobStatus::Stopping);
    stopping.set_secondary_status(v1::SecondaryStatus::Stopping);
    persistence::WriteBatch batch;
    batch.Put({.name = "half",
               .creation_time_us = ToUnixMicros(stopping.creation_time()),
               .last_modified_us = ToUnixMicros(stopping.last_modified_time()),
               .status = "Stopping",
               .record = stopping.SerializeAsString()});
    ASSERT_TRUE((*sqlite)->Write(batch).ok());
  }
  Open();
  WaitForStatus("half", v1::TrainingJobStatus::Stopped);
}

TEST_F(TrainingJobManagerTest, StorageFailureFailsTheCallAndLosesNothing) {
  ASSERT_TRUE(Create(JobRequest("before")).ok());
  storage_->FailWrites(absl::ResourceExhaustedError("disk full (injected)"));
  auto failed = Create(JobRequest("during"));
  ASSERT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(failed.status().message(), HasSubstr("disk full"));
  EXPECT_EQ(Describe("during").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Stop("before").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Describe("before")->training_job_status(), v1::TrainingJobStatus::InProgress);

  storage_->Heal();
  EXPECT_TRUE(Create(JobRequest("during")).ok());
  Reopen();
  EXPECT_TRUE(Describe("before").ok());
  EXPECT_TRUE(Describe("during").ok());
  EXPECT_EQ(Describe("before")->training_job_status(), v1::TrainingJobStatus::InProgress);
}

TEST_F(TrainingJobManagerTest, CorruptStoredRecordRefusesToStartNamingTheJob) {
  manager_.reset();
  {
    auto sqlite = persistence::SqliteStorage::Open((dir_.path() / "jobs.db").string());
    ASSERT_TRUE(sqlite.ok());
    persistence::WriteBatch batch;
    batch.Put({.name = "broken", .status = "InProgress", .record = "\xff\xff not a proto"});
    ASSERT_TRUE((*sqlite)->Write(batch).ok());
  }
  auto sqlite = persistence::SqliteStorage::Open((dir_.path() / "jobs.db").string());
  ASSERT_TRUE(sqlite.ok());
  auto manager = TrainingJobManager::Create(*std::move(sqlite), {});
  ASSERT_EQ(manager.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(manager.status().message(), HasSubstr("broken"));
}

TEST_F(TrainingJobManagerTest, WatchSeesCurrentStateThenEveryChangeThenEnds) {
  ASSERT_TRUE(Create(JobRequest("w", 1, 0)).ok());
  RecordingWatcher watcher;
  v1::WatchTrainingJobRequest request;
  request.set_training_job_name("w");
  auto registration = manager_->WatchTrainingJob(request, &watcher);
  ASSERT_TRUE(registration.ok()) << registration.status();

  absl::Notification rule_set;
  manager_->SetRuleEvaluationStatus(
      "w", "VanishingGradient0", v1::RuleEvaluationStatus::IssuesFound,
      "step 12: gradient mean 1e-9 < threshold 1e-7", [&](absl::Status s) {
        EXPECT_TRUE(s.ok()) << s;
        rule_set.Notify();
      });
  rule_set.WaitForNotification();
  ASSERT_TRUE(Stop("w").ok());
  EXPECT_TRUE(watcher.WaitForEnd().ok());

  auto events = watcher.events();
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events[0]->changes(0).kind(), v1::StatusChange::KIND_INITIAL_STATE);
  EXPECT_EQ(events[1]->changes(0).kind(), v1::StatusChange::KIND_DEBUG_RULE_STATUS);
  EXPECT_EQ(events[1]->changes(0).to(), "IssuesFound");
  EXPECT_THAT(events[1]->changes(0).details(), HasSubstr("step 12"));
  EXPECT_EQ(events[2]->training_job_status(), v1::TrainingJobStatus::Stopping);
  EXPECT_EQ(events.back()->training_job_status(), v1::TrainingJobStatus::Stopped);
  // The IssuesFound rule stays IssuesFound through the stop.
  EXPECT_EQ(events.back()->debug_rule_evaluation_statuses(0).rule_evaluation_status(),
            v1::RuleEvaluationStatus::IssuesFound);
}

TEST_F(TrainingJobManagerTest, WatchOfUnknownOrSettledJob) {
  RecordingWatcher unknown;
  v1::WatchTrainingJobRequest request;
  request.set_training_job_name("ghost");
  EXPECT_EQ(manager_->WatchTrainingJob(request, &unknown).status().code(),
            absl::StatusCode::kNotFound);

  ASSERT_TRUE(Create(JobRequest("done")).ok());
  ASSERT_TRUE(Stop("done").ok());
  WaitForStatus("done", v1::TrainingJobStatus::Stopped);
  RecordingWatcher settled;
  request.set_training_job_name("done");
  auto registration = manager_->WatchTrainingJob(request, &settled);
  ASSERT_TRUE(registration.ok());
  EXPECT_TRUE(settled.WaitForEnd().ok());
  EXPECT_EQ(settled.events().size(), 1u);
}

TEST_F(TrainingJobManagerTest, ListSortsFiltersAndPagesWithoutDuplicatesWhileJobsAreCreated) {
  for (int i = 0; i < 25; ++i) {
    ASSERT_TRUE(Create(JobRequest(absl::StrCat("page-", 100 + i), 0, 0)).ok());
  }
  ASSERT_TRUE(Create(JobRequest("other-1", 0, 0)).ok());

  v1::ListTrainingJobsRequest request;
  request.set_name_contains("PAGE");  // Case-insensitive, as in SageMaker.
  request.set_max_results(7);
  request.set_sort_by("Name");
  request.set_sort_order("Ascending");
  std::vector<std::string> names;
  int pages = 0;
  int extra = 0;
  while (true) {
    auto page = List(request);
    ASSERT_TRUE(page.ok()) << page.status();
    ++pages;
    for (const auto& s : page->training_job_summaries()) names.push_back(s.training_job_name());
    // New jobs that sort before the cursor must not disturb the paging.
    ASSERT_TRUE(Create(JobRequest(absl::StrCat("page-0", extra++), 0, 0)).ok());
    if (page->next_token().empty()) break;
    request.set_next_token(page->next_token());
  }
  EXPECT_EQ(pages, 4);
  ASSERT_EQ(names.size(), 25u);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), 25u);

  // Default: newest first.
  v1::ListTrainingJobsRequest newest;
  newest.set_max_results(1);
  auto first = List(newest);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->training_job_summaries(0).training_job_name(), "page-03");

  // A token replayed with other filters is refused.
  v1::ListTrainingJobsRequest mismatched = request;
  mismatched.set_name_contains("other");
  mismatched.set_next_token(first->next_token());
  auto refused = List(mismatched);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FieldViolationsOf(refused.status())[0].field, "NextToken");
  mismatched.set_next_token("garbage!!");
  EXPECT_EQ(List(mismatched).status().code(), absl::StatusCode::kInvalidArgument);

  // Status filter.
  ASSERT_TRUE(Stop("other-1").ok());
  WaitForStatus("other-1", v1::TrainingJobStatus::Stopped);
  v1::ListTrainingJobsRequest stopped;
  stopped.set_status_equals(v1::TrainingJobStatus::Stopped);
  auto only = List(stopped);
  ASSERT_TRUE(only.ok());
  ASSERT_EQ(only->training_job_summaries_size(), 1);
  EXPECT_EQ(only->training_job_summaries(0).training_job_name(), "other-1");
}

TEST_F(TrainingJobManagerTest, ListPagesByCreationTimeAndStatusBothDirections) {
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(Create(JobRequest(absl::StrCat("c", i), 0, 0)).ok());
  }
  for (const char* sort_by : {"CreationTime", "Status", "Name"}) {
    for (const char* order : {"Ascending", "Descending"}) {
      v1::ListTrainingJobsRequest request;
      request.set_sort_by(sort_by);
      request.set_sort_order(order);
      request.set_max_results(5);
      std::set<std::string> seen;
      int count = 0;
      while (true) {
        auto page = List(request);
        ASSERT_TRUE(page.ok()) << page.status();
        for (const auto& s : page->training_job_summaries()) {
          seen.insert(s.training_job_name());
          ++count;
        }
        if (page->next_token().empty()) break;
        request.set_next_token(page->next_token());
      }
      EXPECT_EQ(count, 12) << sort_by << "/" << order;
      EXPECT_EQ(seen.size(), 12u);
    }
  }
}

TEST_F(TrainingJobManagerTest, ConcurrentCreatesAreAllDurable) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 50;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        if (Create(JobRequest(absl::StrCat("t", t, "-", i), 1, 1)).ok()) ++ok;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(ok.load(), kThreads * kPerThread);
  Reopen();
  EXPECT_EQ(manager_->job_count(), static_cast<size_t>(kThreads * kPerThread));
}

TEST_F(TrainingJobManagerTest, ShutdownRefusesNewChangesButKeepsQueuedOnes) {
  ASSERT_TRUE(Create(JobRequest("x")).ok());
  manager_->Shutdown();
  EXPECT_EQ(Create(JobRequest("y")).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(Describe("x").ok());
}

// Records the directives of one agent connection.
class RecordingAgent : public AgentDirectiveSink {
 public:
  void OnDirective(std::shared_ptr<const v1::ConnectAgentResponse> directive) override {
    absl::MutexLock lock(&mu_);
    directives_.push_back(std::move(directive));
  }
  void OnEnd(absl::Status status) override {
    absl::MutexLock lock(&mu_);
    end_ = status;
    ended_.Notify();
  }
  absl::Status WaitForEnd() {
    EXPECT_TRUE(ended_.WaitForNotificationWithTimeout(absl::Seconds(10)));
    absl::MutexLock lock(&mu_);
    return end_;
  }
  std::vector<std::shared_ptr<const v1::ConnectAgentResponse>> directives() {
    absl::MutexLock lock(&mu_);
    return directives_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::shared_ptr<const v1::ConnectAgentResponse>> directives_ ABSL_GUARDED_BY(mu_);
  absl::Status end_ ABSL_GUARDED_BY(mu_);
  absl::Notification ended_;
};

TEST_F(TrainingJobManagerTest, AnAgentGetsEveryConfigVersionThenTheStopOrder) {
  ASSERT_TRUE(Create(JobRequest("agent-job")).ok());
  TrainingAgentManager agents(manager_.get());
  RecordingAgent agent;
  v1::ConnectAgentRequest connect;
  connect.set_training_job_name("agent-job");
  auto registration = agents.ConnectAgent(connect, &agent);
  ASSERT_TRUE(registration.ok()) << registration.status();
  ASSERT_EQ(agent.directives().size(), 1u);
  EXPECT_EQ(agent.directives()[0]->config_version(), 1);
  EXPECT_FALSE(agent.directives()[0]->stop());
  EXPECT_EQ(agent.directives()[0]->debug_hook_config().s3_output_path(),
            "s3://bucket/debug-output");

  v1::UpdateTrainingJobRequest update;
  update.set_training_job_name("agent-job");
  update.mutable_profiler_config()->set_profiling_interval_in_milliseconds(100);
  ASSERT_TRUE(Update(update).ok());
  // A change that is not the configuration (progress) sends nothing new.
  v1::ReportTrainingStatusRequest progress;
  progress.set_training_job_name("agent-job");
  progress.set_event(v1::ReportTrainingStatusRequest::EVENT_PROGRESS);
  progress.set_current_step(7);
  v1::ReportTrainingStatusResponse reported;
  absl::Notification reported_done;
  agents.ReportTrainingStatus(progress, &reported, [&](absl::Status status) {
    EXPECT_TRUE(status.ok()) << status;
    reported_done.Notify();
  });
  reported_done.WaitForNotification();
  EXPECT_EQ(Describe("agent-job")->progress_info().current_step(), 7);

  ASSERT_TRUE(Stop("agent-job").ok());
  // The order reaches the connected agent; the job is Stopped once the agent
  // reports that the training process exited.
  ASSERT_TRUE(agent.directives().back()->stop());
  EXPECT_EQ(agent.directives().back()->stop_reason(), "Stopping the training job");
  EXPECT_EQ(agent.directives().back()->training_job_status(), v1::TrainingJobStatus::Stopping);
  v1::ReportTrainingStatusRequest exited;
  exited.set_training_job_name("agent-job");
  exited.set_event(v1::ReportTrainingStatusRequest::EVENT_STOPPED);
  exited.set_status_message("the training command was not started");
  absl::Notification exited_done;
  agents.ReportTrainingStatus(exited, &reported, [&](absl::Status status) {
    EXPECT_TRUE(status.ok()) << status;
    exited_done.Notify();
  });
  exited_done.WaitForNotification();
  EXPECT_TRUE(agent.WaitForEnd().ok());
  auto directives = agent.directives();
  ASSERT_GE(directives.size(), 4u);
  EXPECT_EQ(directives[1]->config_version(), 2);
  EXPECT_EQ(directives[1]->profiler_config().profiling_interval_in_milliseconds(), 100);
  EXPECT_TRUE(directives.back()->stop());
  EXPECT_EQ(directives.back()->stop_reason(), "Stopping the training job");
  EXPECT_EQ(directives.back()->training_job_status(), v1::TrainingJobStatus::Stopped);
}

TEST_F(TrainingJobManagerTest, AgentReportsStartAndEndTheJob) {
  TrainingAgentManager agents(manager_.get());
  auto report = [&](const std::string& job, v1::ReportTrainingStatusRequest::Event event,
                    const std::string& reason = "") {
    v1::ReportTrainingStatusRequest request;
    request.set_training_job_name(job);
    request.set_event(event);
    request.set_failure_reason(reason);
    v1::ReportTrainingStatusResponse response;
    absl::Notification done;
    absl::Status result;
    agents.ReportTrainingStatus(request, &response, [&](absl::Status status) {
      result = status;
      done.Notify();
    });
    done.WaitForNotification();
    return result.ok() ? absl::StatusOr<v1::ReportTrainingStatusResponse>(response)
                       : absl::StatusOr<v1::ReportTrainingStatusResponse>(result);
  };
  ASSERT_TRUE(Create(JobRequest("ok-job")).ok());
  ASSERT_TRUE(report("ok-job", v1::ReportTrainingStatusRequest::EVENT_STARTED).ok());
  auto job = Describe("ok-job");
  EXPECT_EQ(job->secondary_status(), v1::SecondaryStatus::Training);
  EXPECT_TRUE(job->has_training_start_time());
  auto completed = report("ok-job", v1::ReportTrainingStatusRequest::EVENT_COMPLETED);
  ASSERT_TRUE(completed.ok());
  EXPECT_EQ(completed->training_job_status(), v1::TrainingJobStatus::Completed);
  job = Describe("ok-job");
  EXPECT_EQ(job->secondary_status(), v1::SecondaryStatus::Completed);
  EXPECT_TRUE(job->has_training_end_time());
  // Rules go on reading the data after the training ended.
  EXPECT_EQ(job->debug_rule_evaluation_statuses(0).rule_evaluation_status(),
            v1::RuleEvaluationStatus::InProgress);

  ASSERT_TRUE(Create(JobRequest("bad-job")).ok());
  auto failed = report("bad-job", v1::ReportTrainingStatusRequest::EVENT_FAILED,
                       "the training command exited with code 3");
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->training_job_status(), v1::TrainingJobStatus::Failed);
  EXPECT_EQ(Describe("bad-job")->failure_reason(), "the training command exited with code 3");

  // A stopped job stays Stopped whatever the agent reports afterwards.
  ASSERT_TRUE(Create(JobRequest("stopped-job")).ok());
  ASSERT_TRUE(Stop("stopped-job").ok());
  WaitForStatus("stopped-job", v1::TrainingJobStatus::Stopped);
  auto late = report("stopped-job", v1::ReportTrainingStatusRequest::EVENT_FAILED, "killed");
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(late->training_job_status(), v1::TrainingJobStatus::Stopped);

  EXPECT_EQ(report("bad-job", v1::ReportTrainingStatusRequest::EVENT_FAILED).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(report("nope", v1::ReportTrainingStatusRequest::EVENT_STARTED).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(TrainingJobManagerTest, ANegativeCurrentStepIsRefusedNamingTheField) {
  ASSERT_TRUE(Create(JobRequest("steps")).ok());
  TrainingAgentManager agents(manager_.get());
  for (auto event : {v1::ReportTrainingStatusRequest::EVENT_PROGRESS,
                     v1::ReportTrainingStatusRequest::EVENT_STARTED}) {
    v1::ReportTrainingStatusRequest request;
    request.set_training_job_name("steps");
    request.set_event(event);
    request.set_current_step(-3);
    v1::ReportTrainingStatusResponse response;
    CallResult result;
    agents.ReportTrainingStatus(request, &response, result.Callback());
    ASSERT_TRUE(result.WaitForCompletion(absl::Seconds(10)));
    ASSERT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << result.status();
    auto violations = FieldViolationsOf(result.status());
    ASSERT_EQ(violations.size(), 1u);
    EXPECT_EQ(violations[0].field, "CurrentStep");
    EXPECT_THAT(violations[0].description, HasSubstr("-3 is negative"));
  }
  // Nothing changed; step 0 is a step.
  EXPECT_FALSE(Describe("steps")->progress_info().has_current_step());
  v1::ReportTrainingStatusRequest zero;
  zero.set_training_job_name("steps");
  zero.set_event(v1::ReportTrainingStatusRequest::EVENT_PROGRESS);
  zero.set_current_step(0);
  v1::ReportTrainingStatusResponse response;
  CallResult result;
  agents.ReportTrainingStatus(zero, &response, result.Callback());
  ASSERT_TRUE(result.WaitForCompletion(absl::Seconds(10)));
  EXPECT_TRUE(result.status().ok()) << result.status();
  EXPECT_EQ(Describe("steps")->progress_info().current_step(), 0);
}

TEST_F(TrainingJobManagerTest, TheAgentsAppliedConfigVersionIsRecordedWithItsTime) {
  ASSERT_TRUE(Create(JobRequest("applied")).ok());
  TrainingAgentManager agents(manager_.get());
  auto report = [&](std::optional<int64_t> version) {
    v1::ReportTrainingStatusRequest request;
    request.set_training_job_name("applied");
    request.set_event(v1::ReportTrainingStatusRequest::EVENT_CONFIG_APPLIED);
    if (version.has_value()) request.set_applied_config_version(*version);
    v1::ReportTrainingStatusResponse response;
    CallResult result;
    agents.ReportTrainingStatus(request, &response, result.Callback());
    EXPECT_TRUE(result.WaitForCompletion(absl::Seconds(10)));
    return result.status();
  };
  auto applied_time = [&] {
    auto job = Describe("applied");
    return absl::FromUnixSeconds(job->profiler_config_applied_time().seconds()) +
           absl::Nanoseconds(job->profiler_config_applied_time().nanos());
  };
  // Nothing reported yet.
  EXPECT_FALSE(Describe("applied")->has_profiler_config_applied_time());
  EXPECT_EQ(Describe("applied")->profiler_config_applied_version(), 0);

  ASSERT_TRUE(report(1).ok());
  EXPECT_EQ(Describe("applied")->profiler_config_applied_version(), 1);
  EXPECT_TRUE(Describe("applied")->has_profiler_config_applied_time());
  const absl::Time first = applied_time();

  // A version the job does not have yet, or none: refused, naming the field.
  for (std::optional<int64_t> bad :
       {std::optional<int64_t>(2), std::optional<int64_t>(0), std::optional<int64_t>()}) {
    const absl::Status refused = report(bad);
    ASSERT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
    ASSERT_EQ(FieldViolationsOf(refused).size(), 1u);
    EXPECT_EQ(FieldViolationsOf(refused)[0].field, "AppliedConfigVersion");
  }
  EXPECT_THAT(FieldViolationsOf(report(2))[0].description,
              HasSubstr("2 is newer than the job's ConfigVersion 1"));

  // An update, then the agent applies it: the time moves to after the update.
  v1::UpdateTrainingJobRequest update;
  update.set_training_job_name("applied");
  update.mutable_profiler_config()->set_profiling_interval_in_milliseconds(100);
  ASSERT_TRUE(Update(update).ok());
  EXPECT_EQ(Describe("applied")->profiler_config_applied_version(), 1);
  ASSERT_TRUE(report(2).ok());
  auto job = Describe("applied");
  EXPECT_EQ(job->profiler_config_applied_version(), 2);
  const auto& updated = job->configuration_updates(0).update_time();
  EXPECT_GE(applied_time(),
            absl::FromUnixSeconds(updated.seconds()) + absl::Nanoseconds(updated.nanos()));
  EXPECT_GE(applied_time(), first);

  // A late report of an older version changes nothing.
  const absl::Time second = applied_time();
  ASSERT_TRUE(report(1).ok());
  EXPECT_EQ(Describe("applied")->profiler_config_applied_version(), 2);
  EXPECT_EQ(applied_time(), second);
}

TEST_F(TrainingJobManagerTest, AWatcherBlockedInOnEventHoldsUpNeitherReadsNorOtherJobs) {
  ASSERT_TRUE(Create(JobRequest("blocked")).ok());
  ASSERT_TRUE(Create(JobRequest("free")).ok());
  BlockingWatcher watcher;
  auto registration = manager_->WatchTrainingJob(WatchRequest("blocked"), &watcher);
  ASSERT_TRUE(registration.ok()) << registration.status();
  // The current state is there when WatchTrainingJob returns.
  ASSERT_EQ(watcher.events().size(), 1u);

  v1::StopTrainingJobRequest stop_request;
  stop_request.set_training_job_name("blocked");
  v1::StopTrainingJobResponse stop_response;
  CallResult stop;
  manager_->StopTrainingJob(stop_request, &stop_response, stop.Callback());
  ASSERT_TRUE(watcher.WaitUntilBlocked(absl::Seconds(10)));

  // While the watcher is stuck in OnEvent: reads see the committed change,
  // and other jobs' changes are committed and acknowledged.
  absl::Notification others_done;
  std::thread others([&] {
    auto job = Describe("blocked");
    EXPECT_TRUE(job.ok()) << job.status();
    if (job.ok()) EXPECT_NE(job->training_job_status(), v1::TrainingJobStatus::InProgress);
    auto listed = List(v1::ListTrainingJobsRequest());
    EXPECT_TRUE(listed.ok()) << listed.status();
    if (listed.ok()) EXPECT_EQ(listed->training_job_summaries_size(), 2);
    EXPECT_TRUE(Stop("free").ok());
    EXPECT_TRUE(Create(JobRequest("created-meanwhile")).ok());
    others_done.Notify();
  });
  EXPECT_TRUE(others_done.WaitForNotificationWithTimeout(absl::Seconds(10)))
      << "reads or other jobs' changes waited for a blocked watcher";
  // The stop is committed but not acknowledged before its watcher has it.
  EXPECT_FALSE(stop.done());
  watcher.Release();
  others.join();
  ASSERT_TRUE(stop.WaitForCompletion(absl::Seconds(10)));
  EXPECT_TRUE(stop.status().ok()) << stop.status();
  EXPECT_TRUE(watcher.WaitForEnd().ok());
  EXPECT_EQ(watcher.events().back()->training_job_status(), v1::TrainingJobStatus::Stopped);
}

TEST_F(TrainingJobManagerTest, EveryWatcherSeesTheChangesOfItsJobInCommitOrder) {
  ASSERT_TRUE(Create(JobRequest("ordered")).ok());
  StepRecorder slow(absl::Microseconds(300));
  StepRecorder fast(absl::ZeroDuration());
  StepRecorder late(absl::ZeroDuration());
  auto slow_registration = manager_->WatchTrainingJob(WatchRequest("ordered"), &slow);
  auto fast_registration = manager_->WatchTrainingJob(WatchRequest("ordered"), &fast);
  ASSERT_TRUE(slow_registration.ok() && fast_registration.ok());

  // Reports sent from one thread without waiting are committed in order, in
  // groups, while the watchers are still being told of earlier ones.
  constexpr int kSteps = 300;
  std::vector<v1::ReportTrainingStatusRequest> requests(kSteps);
  std::vector<v1::ReportTrainingStatusResponse> responses(kSteps);
  std::vector<CallResult> results(kSteps);
  absl::StatusOr<std::unique_ptr<WatchRegistration>> late_registration;
  for (int i = 0; i < kSteps; ++i) {
    requests[i].set_training_job_name("ordered");
    requests[i].set_event(v1::ReportTrainingStatusRequest::EVENT_PROGRESS);
    requests[i].set_current_step(i + 1);
    manager_->ReportTrainingStatus(requests[i], &responses[i], results[i].Callback());
    if (i == kSteps / 2) {
      late_registration = manager_->WatchTrainingJob(WatchRequest("ordered"), &late);
    }
  }
  for (CallResult& result : results) {
    ASSERT_TRUE(result.WaitForCompletion(absl::Seconds(10)));
    ASSERT_TRUE(result.status().ok()) << result.status();
  }
  ASSERT_TRUE(late_registration.ok());

  // Acknowledged means delivered: every watcher has had every record, once,
  // in commit order (the initial state first).
  std::vector<int64_t> all(kSteps + 1);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(slow.steps(), all);
  EXPECT_EQ(fast.steps(), all);
  // One registered midway sees the state then, then every later commit.
  std::vector<int64_t> seen = late.steps();
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen, std::vector<int64_t>(all.begin() + seen.front(), all.end()));
}

TEST_F(TrainingJobManagerTest, UnregisteringWaitsForADeliveryInProgressThenNothingMoreComes) {
  ASSERT_TRUE(Create(JobRequest("watched", 1, 0)).ok());
  BlockingWatcher watcher;
  auto registration = manager_->WatchTrainingJob(WatchRequest("watched"), &watcher);
  ASSERT_TRUE(registration.ok()) << registration.status();
  CallResult rule_set;
  manager_->SetRuleEvaluationStatus("watched", "VanishingGradient0",
                                    v1::RuleEvaluationStatus::IssuesFound, "step 3",
                                    rule_set.Callback());
  ASSERT_TRUE(watcher.WaitUntilBlocked(absl::Seconds(10)));

  absl::Notification unregistered;
  std::thread unregister([&] {
    registration->reset();
    unregistered.Notify();
  });
  // The watcher may be destroyed once this returns: not while its OnEvent runs.
  EXPECT_FALSE(unregistered.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  watcher.Release();
  EXPECT_TRUE(unregistered.WaitForNotificationWithTimeout(absl::Seconds(10)));
  unregister.join();
  ASSERT_TRUE(rule_set.WaitForCompletion(absl::Seconds(10)));
  EXPECT_TRUE(rule_set.status().ok()) << rule_set.status();

  const size_t seen = watcher.events().size();
  ASSERT_TRUE(Stop("watched").ok());
  WaitForStatus("watched", v1::TrainingJobStatus::Stopped);
  EXPECT_EQ(watcher.events().size(), seen);
  EXPECT_FALSE(watcher.ended());
}

TEST_F(TrainingJobManagerTest, UnregisteringDoesNotWaitForDeliveriesQueuedBehindABlockedWatcher) {
  watch_delivery_threads_ = 1;
  Reopen();
  ASSERT_TRUE(Create(JobRequest("stuck")).ok());
  ASSERT_TRUE(Create(JobRequest("queued")).ok());
  BlockingWatcher stuck;
  RecordingWatcher queued;
  auto stuck_registration = manager_->WatchTrainingJob(WatchRequest("stuck"), &stuck);
  auto queued_registration = manager_->WatchTrainingJob(WatchRequest("queued"), &queued);
  ASSERT_TRUE(stuck_registration.ok() && queued_registration.ok());

  v1::StopTrainingJobRequest stop_stuck;
  stop_stuck.set_training_job_name("stuck");
  v1::StopTrainingJobResponse stuck_response;
  CallResult stuck_stopped;
  manager_->StopTrainingJob(stop_stuck, &stuck_response, stuck_stopped.Callback());
  ASSERT_TRUE(stuck.WaitUntilBlocked(absl::Seconds(10)));  // The one delivery thread.

  // The next job's change is committed; its delivery waits for that thread.
  v1::StopTrainingJobRequest stop_queued;
  stop_queued.set_training_job_name("queued");
  v1::StopTrainingJobResponse queued_response;
  CallResult queued_stopped;
  manager_->StopTrainingJob(stop_queued, &queued_response, queued_stopped.Callback());
  ::debugplane::testing::WaitUntil([&] {
    return manager_->GetJob("queued")->training_job_status() != v1::TrainingJobStatus::InProgress;
  });
  ASSERT_NE(manager_->GetJob("queued")->training_job_status(), v1::TrainingJobStatus::InProgress);

  // Unregistering drops what is queued without waiting for the pool.
  absl::Notification unregistered;
  std::thread unregister([&] {
    queued_registration->reset();
    unregistered.Notify();
  });
  EXPECT_TRUE(unregistered.WaitForNotificationWithTimeout(absl::Seconds(10)));
  stuck.Release();
  unregister.join();
  // The dropped delivery still lets the change be acknowledged.
  ASSERT_TRUE(queued_stopped.WaitForCompletion(absl::Seconds(10)));
  EXPECT_TRUE(queued_stopped.status().ok()) << queued_stopped.status();
  ASSERT_TRUE(stuck_stopped.WaitForCompletion(absl::Seconds(10)));
  EXPECT_EQ(queued.events().size(), 1u);  // Only the initial state.
}

TEST_F(TrainingJobManagerTest, CreateAndUpdateAreValidatedOffTheCallersThread) {
  const std::thread::id caller = std::this_thread::get_id();
  // Local output paths under the data root: checked against the file system.
  auto request = JobRequest("local");
  request.mutable_debug_hook_config()->set_s3_output_path((dir_.path() / "tensors").string());
  v1::CreateTrainingJobResponse created_response;
  CallResult created;
  manager_->CreateTrainingJob(request, &created_response, created.Callback());
  ASSERT_TRUE(created.WaitForCompletion(absl::Seconds(10)));
  ASSERT_TRUE(created.status().ok()) << created.status();
  EXPECT_NE(created.thread(), caller);

  // A path through a symbolic link that leads out of the root is refused
  // (the file system says so), answered from the pool too.
  std::filesystem::create_symlink("/", dir_.path() / "to-root");
  auto escaping = JobRequest("escaping");
  escaping.mutable_debug_hook_config()->set_s3_output_path(
      (dir_.path() / "to-root" / "tmp" / "tensors").string());
  v1::CreateTrainingJobResponse refused_response;
  CallResult refused;
  manager_->CreateTrainingJob(escaping, &refused_response, refused.Callback());
  ASSERT_TRUE(refused.WaitForCompletion(absl::Seconds(10)));
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_EQ(FieldViolationsOf(refused.status())[0].field, "DebugHookConfig.S3OutputPath");
  EXPECT_NE(refused.thread(), caller);

  v1::UpdateTrainingJobRequest update;
  update.set_training_job_name("local");
  update.mutable_profiler_config()->set_s3_output_path((dir_.path() / "profiler").string());
  v1::UpdateTrainingJobResponse updated_response;
  CallResult updated;
  manager_->UpdateTrainingJob(update, &updated_response, updated.Callback());
  ASSERT_TRUE(updated.WaitForCompletion(absl::Seconds(10)));
  ASSERT_TRUE(updated.status().ok()) << updated.status();
  EXPECT_NE(updated.thread(), caller);
  EXPECT_EQ(Describe("local")->profiler_config().s3_output_path(),
            (dir_.path() / "profiler").string());

  update.mutable_profiler_config()->set_s3_output_path(
      (dir_.path() / "to-root" / "tmp" / "profiler").string());
  CallResult update_refused;
  manager_->UpdateTrainingJob(update, &updated_response, update_refused.Callback());
  ASSERT_TRUE(update_refused.WaitForCompletion(absl::Seconds(10)));
  ASSERT_EQ(update_refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FieldViolationsOf(update_refused.status())[0].field, "ProfilerConfig.S3OutputPath");
  EXPECT_NE(update_refused.thread(), caller);
}

TEST_F(TrainingJobManagerTest, ShutdownEndsWatchesAndRefusesCreatesWaitingForValidation) {
  ASSERT_TRUE(Create(JobRequest("running")).ok());
  RecordingWatcher watcher;
  auto registration = manager_->WatchTrainingJob(WatchRequest("running"), &watcher);
  ASSERT_TRUE(registration.ok());
  manager_->Shutdown();
  EXPECT_EQ(watcher.WaitForEnd().code(), absl::StatusCode::kUnavailable);
  auto late = Create(JobRequest("late"));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kUnavailable);
  v1::UpdateTrainingJobRequest update;
  update.set_training_job_name("running");
  update.mutable_profiler_config()->set_profiling_interval_in_milliseconds(100);
  EXPECT_EQ(Update(update).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(TrainingJobManagerTest, AWatchMayBeUnregisteredAfterTheManagerIsGone) {
  ASSERT_TRUE(Create(JobRequest("outlived")).ok());
  RecordingWatcher watcher;
  auto registration = manager_->WatchTrainingJob(WatchRequest("outlived"), &watcher);
  ASSERT_TRUE(registration.ok()) << registration.status();
  manager_.reset();
  EXPECT_EQ(watcher.WaitForEnd().code(), absl::StatusCode::kUnavailable);
  // A stream that ends after the server's manager: nothing of it is touched.
  registration->reset();
  Open();
  EXPECT_TRUE(Describe("outlived").ok());
}

}  // namespace
}  // namespace debugplane::core
