#include "core/jobs/job_record.h"

#include <regex>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace debugplane::core {
namespace {

using ::testing::HasSubstr;

const absl::Time kT0 = absl::FromUnixSeconds(1800000000);

v1::CreateTrainingJobRequest Request() {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name("job");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out/");
  auto* rule = request.add_debug_rule_configurations();
  rule->set_rule_configuration_name("VG");
  auto* profiler = request.add_profiler_rule_configurations();
  profiler->set_rule_configuration_name("PR");
  return request;
}

TEST(JobRecordTest, NewRecordFillsSageMakerDefaults) {
  JobRecord job = NewJobRecord(Request(), ArnScope{}, kT0);
  EXPECT_EQ(job.training_job_status(), v1::TrainingJobStatus::InProgress);
  EXPECT_EQ(job.secondary_status(), v1::SecondaryStatus::Starting);
  EXPECT_EQ(job.profiler_config().profiling_interval_in_milliseconds(), 500);
  EXPECT_EQ(job.profiler_config().s3_output_path(), "s3://bucket/out/job/profiler-output");
  // SageMaker shows ModelArtifacts only once training completed.
  EXPECT_FALSE(job.has_model_artifacts());
  EXPECT_EQ(job.stopping_condition().max_runtime_in_seconds(), 86400);
  EXPECT_EQ(job.profiling_status(), v1::ProfilingStatus::Enabled);
  EXPECT_EQ(ToAbslTime(job.creation_time()), kT0);
  ASSERT_EQ(job.debug_rule_evaluation_statuses_size(), 1);
  ASSERT_EQ(job.profiler_rule_evaluation_statuses_size(), 1);
}

TEST(JobRecordTest, DisabledProfilerIsReportedDisabled) {
  auto request = Request();
  request.mutable_profiler_config()->set_disable_profiler(true);
  EXPECT_EQ(NewJobRecord(request, ArnScope{}, kT0).profiling_status(),
            v1::ProfilingStatus::Disabled);
}

TEST(JobRecordTest, RuleEvaluationArnsAreValidProcessingJobArnsAndDeterministic) {
  const std::regex pattern(
      R"(arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:processing-job/[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62})");
  const std::string long_job(63, 'j');
  const std::string long_rule = "Rule with spaces & symbols " + std::string(200, 'r');
  for (const auto& [job, rule] : std::vector<std::pair<std::string, std::string>>{
           {"job", "VanishingGradient"}, {long_job, long_rule}, {"a", "---"}, {"x", ""}}) {
    const std::string arn = RuleEvaluationJobArn(ArnScope{}, job, rule, kT0);
    EXPECT_TRUE(std::regex_match(arn, pattern)) << arn;
    EXPECT_LE(arn.substr(arn.find('/') + 1).size(), 63u) << arn;
    EXPECT_EQ(arn, RuleEvaluationJobArn(ArnScope{}, job, rule, kT0));
  }
  EXPECT_NE(RuleEvaluationJobArn(ArnScope{}, "job", "A", kT0),
            RuleEvaluationJobArn(ArnScope{}, "job", "B", kT0));
}

TEST(JobRecordTest, StopLifecycleRecordsEveryTransitionWithTimes) {
  JobRecord job = NewJobRecord(Request(), ArnScope{}, kT0);
  ASSERT_TRUE(BeginStop(job, kT0 + absl::Seconds(1)));
  EXPECT_FALSE(BeginStop(job, kT0 + absl::Seconds(2)));
  EXPECT_EQ(job.training_job_status(), v1::TrainingJobStatus::Stopping);
  EXPECT_EQ(job.debug_rule_evaluation_statuses(0).rule_evaluation_status(),
            v1::RuleEvaluationStatus::Stopping);
  ASSERT_TRUE(CompleteStop(job, kT0 + absl::Seconds(3)));
  EXPECT_FALSE(CompleteStop(job, kT0 + absl::Seconds(4)));
  EXPECT_EQ(job.training_job_status(), v1::TrainingJobStatus::Stopped);
  ASSERT_EQ(job.secondary_status_transitions_size(), 3);
  EXPECT_EQ(ToAbslTime(job.secondary_status_transitions(0).end_time()), kT0 + absl::Seconds(1));
  EXPECT_EQ(ToAbslTime(job.secondary_status_transitions(2).start_time()), kT0 + absl::Seconds(3));
  EXPECT_EQ(ToAbslTime(job.training_end_time()), kT0 + absl::Seconds(3));
  EXPECT_TRUE(IsSettled(job));
}

TEST(JobRecordTest, ModelArtifactsAppearOnlyWhenTrainingCompleted) {
  JobRecord completed = NewJobRecord(Request(), ArnScope{}, kT0);
  ASSERT_TRUE(MarkTrainingStarted(completed, kT0 + absl::Seconds(1)));
  EXPECT_FALSE(completed.has_model_artifacts());
  ASSERT_TRUE(EndTraining(completed, /*succeeded=*/true, "", kT0 + absl::Seconds(5)));
  EXPECT_EQ(completed.model_artifacts().s3_model_artifacts(),
            "s3://bucket/out/job/output/model.tar.gz");
  EXPECT_EQ(completed.training_time_in_seconds(), 4);

  JobRecord failed = NewJobRecord(Request(), ArnScope{}, kT0);
  ASSERT_TRUE(EndTraining(failed, /*succeeded=*/false, "exit 1", kT0));
  EXPECT_FALSE(failed.has_model_artifacts());

  JobRecord stopped = NewJobRecord(Request(), ArnScope{}, kT0);
  ASSERT_TRUE(BeginStop(stopped, kT0));
  ASSERT_TRUE(CompleteStop(stopped, kT0));
  EXPECT_FALSE(stopped.has_model_artifacts());
}

TEST(JobRecordTest, MaxRuntimeCountsFromTheTrainingStartElseFromCreation) {
  auto request = Request();
  request.mutable_stopping_condition()->set_max_runtime_in_seconds(3);
  JobRecord job = NewJobRecord(request, ArnScope{}, kT0);
  EXPECT_EQ(MaxRuntimeDeadline(job), kT0 + absl::Seconds(3));
  ASSERT_TRUE(MarkTrainingStarted(job, kT0 + absl::Seconds(2)));
  EXPECT_EQ(MaxRuntimeDeadline(job), kT0 + absl::Seconds(5));
  // The default limit is SageMaker's day.
  EXPECT_EQ(MaxRuntimeDeadline(NewJobRecord(Request(), ArnScope{}, kT0)), kT0 + absl::Hours(24));

  ASSERT_TRUE(BeginMaxRuntimeStop(job, kT0 + absl::Seconds(5)));
  EXPECT_FALSE(MaxRuntimeDeadline(job).has_value());  // Only InProgress jobs run out of time.
  EXPECT_FALSE(BeginMaxRuntimeStop(job, kT0 + absl::Seconds(6)));
  EXPECT_EQ(job.training_job_status(), v1::TrainingJobStatus::Stopping);
  EXPECT_EQ(job.secondary_status(), v1::SecondaryStatus::Stopping);
  EXPECT_EQ(job.failure_reason(), "Training job exceeded MaxRuntimeInSeconds of 3 s");
  EXPECT_EQ(job.secondary_status_transitions().rbegin()->status_message(),
            "Training job exceeded MaxRuntimeInSeconds of 3 s");
  EXPECT_TRUE(StoppedForMaxRuntime(job));
  EXPECT_EQ(StopOrderTime(job), kT0 + absl::Seconds(5));

  ASSERT_TRUE(CompleteStop(job, kT0 + absl::Seconds(7), "the training command exited"));
  EXPECT_EQ(job.training_job_status(), v1::TrainingJobStatus::Stopped);
  EXPECT_EQ(job.secondary_status(), v1::SecondaryStatus::MaxRuntimeExceeded);
  EXPECT_EQ(job.secondary_status_transitions().rbegin()->status_message(),
            "the training command exited");
  EXPECT_EQ(job.failure_reason(), "Training job exceeded MaxRuntimeInSeconds of 3 s");
  EXPECT_EQ(job.training_time_in_seconds(), 5);
  EXPECT_EQ(job.debug_rule_evaluation_statuses(0).rule_evaluation_status(),
            v1::RuleEvaluationStatus::Stopped);
}

TEST(JobRecordTest, AStopWaitsForTheAgentBoundedByTheLimits) {
  const StopWaitLimits limits{.without_agent = absl::Seconds(10), .for_agent = absl::Minutes(5)};
  JobRecord never_started = NewJobRecord(Request(), ArnScope{}, kT0);
  ASSERT_TRUE(BeginStop(never_started, kT0 + absl::Seconds(1)));
  // No training process was ever started and nobody can start one now.
  StopCompletion plan = PlanStopCompletion(never_started, {.connected = 0}, limits);
  EXPECT_EQ(plan.at, kT0 + absl::Seconds(1));
  EXPECT_THAT(plan.message, HasSubstr("the training had not started"));
  // An agent connected to it gets to say so itself.
  plan = PlanStopCompletion(never_started, {.connected = 1}, limits);
  EXPECT_EQ(plan.at, kT0 + absl::Seconds(1) + absl::Minutes(5));

  JobRecord started = NewJobRecord(Request(), ArnScope{}, kT0);
  ASSERT_TRUE(MarkTrainingStarted(started, kT0));
  ASSERT_TRUE(BeginStop(started, kT0 + absl::Seconds(100)));
  const absl::Time ordered = kT0 + absl::Seconds(100);
  // Connected: only the confirm bound.
  plan = PlanStopCompletion(started, {.connected = 2, .absent_since = kT0}, limits);
  EXPECT_EQ(plan.at, ordered + absl::Minutes(5));
  EXPECT_THAT(plan.message, HasSubstr("the agent did not confirm within 5m"));
  // None connected since before the order: the reconnect wait from the order.
  plan = PlanStopCompletion(started, {.connected = 0, .absent_since = kT0}, limits);
  EXPECT_EQ(plan.at, ordered + absl::Seconds(10));
  EXPECT_THAT(plan.message, HasSubstr("no agent was connected to stop the training process"));
  // The last agent left after the order: the reconnect wait from then.
  plan = PlanStopCompletion(started, {.connected = 0, .absent_since = ordered + absl::Minutes(1)},
                            limits);
  EXPECT_EQ(plan.at, ordered + absl::Minutes(1) + absl::Seconds(10));
  // ... but never past the confirm bound, whichever comes first.
  plan = PlanStopCompletion(
      started, {.connected = 0, .absent_since = ordered + absl::Minutes(4) + absl::Seconds(55)},
      limits);
  EXPECT_EQ(plan.at, ordered + absl::Minutes(5));
  EXPECT_THAT(plan.message, HasSubstr("did not confirm"));
}

TEST(JobRecordTest, TerminalRuleStatusesAreFinal) {
  JobRecord job = NewJobRecord(Request(), ArnScope{}, kT0);
  EXPECT_TRUE(SetRuleStatus(job, "VG", v1::RuleEvaluationStatus::IssuesFound, "step 3", kT0));
  EXPECT_FALSE(SetRuleStatus(job, "VG", v1::RuleEvaluationStatus::NoIssuesFound, "", kT0));
  EXPECT_FALSE(SetRuleStatus(job, "nope", v1::RuleEvaluationStatus::Error, "", kT0));
  // A stop leaves the finding in place.
  BeginStop(job, kT0);
  CompleteStop(job, kT0);
  EXPECT_EQ(job.debug_rule_evaluation_statuses(0).rule_evaluation_status(),
            v1::RuleEvaluationStatus::IssuesFound);
  EXPECT_EQ(job.profiler_rule_evaluation_statuses(0).rule_evaluation_status(),
            v1::RuleEvaluationStatus::Stopped);
}

TEST(JobRecordTest, StatusDetailsAreCappedAtSageMakersLimit) {
  JobRecord job = NewJobRecord(Request(), ArnScope{}, kT0);
  SetRuleStatus(job, "PR", v1::RuleEvaluationStatus::Error, std::string(5000, 'e'), kT0);
  EXPECT_EQ(job.profiler_rule_evaluation_statuses(0).status_details().size(), 1024u);
}

TEST(JobRecordTest, DiffReportsJobRuleAndConfigurationChanges) {
  JobRecord before = NewJobRecord(Request(), ArnScope{}, kT0);
  JobRecord after = before;
  EXPECT_TRUE(DiffForWatch(before, after).empty());
  SetRuleStatus(after, "VG", v1::RuleEvaluationStatus::IssuesFound, "why", kT0);
  after.set_config_version(2);
  BeginStop(after, kT0);
  auto changes = DiffForWatch(before, after);
  ASSERT_EQ(changes.size(), 4u);  // Job, VG, PR (Stopping), configuration.
  EXPECT_EQ(changes[0].kind(), v1::StatusChange::KIND_JOB_STATUS);
  EXPECT_EQ(changes[0].from(), "InProgress/Starting");
  EXPECT_EQ(changes[0].to(), "Stopping/Stopping");
  EXPECT_EQ(changes[1].rule_configuration_name(), "VG");
  EXPECT_EQ(changes[1].to(), "IssuesFound");
  EXPECT_EQ(changes[2].kind(), v1::StatusChange::KIND_PROFILER_RULE_STATUS);
  EXPECT_EQ(changes[3].kind(), v1::StatusChange::KIND_CONFIGURATION);
  auto event = MakeWatchEvent(after, changes, kT0);
  EXPECT_EQ(event.training_job_status(), v1::TrainingJobStatus::Stopping);
  EXPECT_EQ(event.changes_size(), 4);
}

}  // namespace
}  // namespace debugplane::core
