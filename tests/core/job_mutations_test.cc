// The job mutations as pure functions: a record and a request in, the next
// record (or an error) out; no manager, no storage, no clock.

#include "core/jobs/job_mutations.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace debugplane::core {
namespace {

using ::testing::HasSubstr;

const absl::Time kT0 = absl::FromUnixSeconds(1800000000);

JobRecord Running() {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name("job");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out/");
  request.add_debug_rule_configurations()->set_rule_configuration_name("VG");
  request.add_profiler_rule_configurations()->set_rule_configuration_name("PR");
  return NewJobRecord(request, ArnScope{}, kT0);
}

TEST(JobMutationsTest, CreateRefusesATakenName) {
  auto record = std::make_shared<const JobRecord>(Running());
  absl::StatusOr<JobMutation> created = CreateJob(nullptr, record, nullptr);
  ASSERT_TRUE(created.ok());
  EXPECT_EQ(created->next, record);
  const JobRecord existing = Running();
  EXPECT_EQ(CreateJob(&existing, record, nullptr).status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST(JobMutationsTest, MissingJobIsNotFound) {
  std::vector<std::string> warnings;
  EXPECT_EQ(StopJob(nullptr, "job", kT0).status(), JobNotFoundError("job"));
  EXPECT_EQ(DeleteJob(nullptr, "job").status(), JobNotFoundError("job"));
  EXPECT_EQ(RecordProgress(nullptr, "job", {}).status(), JobNotFoundError("job"));
  v1::UpdateTrainingJobRequest update;
  update.set_training_job_name("job");
  EXPECT_EQ(UpdateJob(nullptr, update, ArnScope{}, kT0, warnings).status(),
            JobNotFoundError("job"));
}

TEST(JobMutationsTest, UpdateAddsRulesAndBumpsTheConfigVersion) {
  const JobRecord job = Running();
  v1::UpdateTrainingJobRequest update;
  update.set_training_job_name("job");
  update.mutable_profiler_config()->set_profiling_interval_in_milliseconds(100);
  update.add_profiler_rule_configurations()->set_rule_configuration_name("Other");
  std::vector<std::string> warnings;
  absl::StatusOr<JobMutation> updated = UpdateJob(&job, update, ArnScope{}, kT0, warnings);
  ASSERT_TRUE(updated.ok()) << updated.status();
  const JobRecord& next = *updated->next;
  EXPECT_EQ(next.config_version(), job.config_version() + 1);
  EXPECT_EQ(next.profiler_config().profiling_interval_in_milliseconds(), 100);
  ASSERT_EQ(next.profiler_rule_evaluation_statuses_size(), 2);
  EXPECT_EQ(next.profiler_rule_evaluation_statuses(1).rule_evaluation_status(),
            v1::RuleEvaluationStatus::InProgress);
}

TEST(JobMutationsTest, UpdateRefusesATakenRuleNameAndAnEndedJob) {
  JobRecord job = Running();
  v1::UpdateTrainingJobRequest update;
  update.set_training_job_name("job");
  update.add_profiler_rule_configurations()->set_rule_configuration_name("VG");
  std::vector<std::string> warnings;
  absl::Status taken = UpdateJob(&job, update, ArnScope{}, kT0, warnings).status();
  EXPECT_EQ(taken.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(taken.message(), HasSubstr("already has a rule named 'VG'"));
  ASSERT_TRUE(BeginStop(job, kT0));
  EXPECT_EQ(UpdateJob(&job, update, ArnScope{}, kT0, warnings).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(JobMutationsTest, StopTwiceChangesOnce) {
  const JobRecord job = Running();
  absl::StatusOr<JobMutation> stopping = StopJob(&job, "job", kT0, "enough");
  ASSERT_TRUE(stopping.ok());
  ASSERT_TRUE(stopping->changed);
  EXPECT_EQ(stopping->next->training_job_status(), v1::TrainingJobStatus::Stopping);
  absl::StatusOr<JobMutation> again = StopJob(stopping->next.get(), "job", kT0);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->changed);
}

TEST(JobMutationsTest, DeleteOnlyEndedJobs) {
  JobRecord job = Running();
  EXPECT_EQ(DeleteJob(&job, "job").status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(EndTraining(job, /*succeeded=*/true, "", kT0));
  absl::StatusOr<JobMutation> deleted = DeleteJob(&job, "job");
  ASSERT_TRUE(deleted.ok());
  EXPECT_TRUE(deleted->changed);
  EXPECT_EQ(deleted->next, nullptr);
}

TEST(JobMutationsTest, DeadlineEnforcesMaxRuntimeOnlyOnceDue) {
  JobRecord job = Running();
  job.mutable_stopping_condition()->set_max_runtime_in_seconds(60);
  DeadlineOutcome early =
      ApplyDeadline(&job, AgentPresence{}, StopWaitLimits{}, HostWaitLimits{}, kT0);
  EXPECT_FALSE(early.mutation.changed);
  ASSERT_TRUE(early.next_deadline.has_value());
  DeadlineOutcome due = ApplyDeadline(&job, AgentPresence{}, StopWaitLimits{}, HostWaitLimits{},
                                      *early.next_deadline);
  ASSERT_TRUE(due.mutation.changed);
  EXPECT_EQ(due.mutation.next->training_job_status(), v1::TrainingJobStatus::Stopping);
}

TEST(JobMutationsTest, RuleEvaluationOfAnUnknownRuleOrAnEndedOne) {
  const JobRecord job = Running();
  EXPECT_EQ(SetRuleEvaluation(&job, "job", "nope", v1::RuleEvaluationStatus::Error, "", kT0)
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  absl::StatusOr<JobMutation> ended =
      SetRuleEvaluation(&job, "job", "VG", v1::RuleEvaluationStatus::NoIssuesFound, "", kT0);
  ASSERT_TRUE(ended.ok() && ended->changed);
  EXPECT_EQ(SetRuleEvaluation(ended->next.get(), "job", "VG", v1::RuleEvaluationStatus::Error, "",
                              kT0)
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(JobMutationsTest, TrainingReportsAreCheckedAndBounded) {
  v1::ReportTrainingStatusRequest report;
  report.set_training_job_name("job");
  EXPECT_THAT(ValidateTrainingReport(report).message(), HasSubstr("Event"));
  report.set_event(v1::ReportTrainingStatusRequest::EVENT_PROGRESS);
  EXPECT_THAT(ValidateTrainingReport(report).message(), HasSubstr("CurrentStep"));
  report.set_current_step(7);
  EXPECT_TRUE(ValidateTrainingReport(report).ok());
  report.set_status_message(std::string(5 * kMaxStatusTextChars, 'x'));
  EXPECT_LE(BoundTrainingReport(report).status_message().size(), kMaxStatusTextChars + 8);
}

TEST(JobMutationsTest, StoppedReportNeedsAStopOrder) {
  const JobRecord job = Running();
  v1::ReportTrainingStatusRequest report;
  report.set_training_job_name("job");
  report.set_event(v1::ReportTrainingStatusRequest::EVENT_STOPPED);
  v1::TrainingJobStatus::Value status = v1::TrainingJobStatus::TRAINING_JOB_STATUS_UNSPECIFIED;
  EXPECT_EQ(ApplyTrainingReport(&job, report, kT0, status).status().code(),
            absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<JobMutation> stopping = StopJob(&job, "job", kT0);
  ASSERT_TRUE(stopping.ok());
  absl::StatusOr<JobMutation> stopped =
      ApplyTrainingReport(stopping->next.get(), report, kT0, status);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_TRUE(stopped->changed);
  EXPECT_EQ(status, v1::TrainingJobStatus::Stopped);
}

}  // namespace
}  // namespace debugplane::core
