#include "core/jobs/job_mutations.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/jobs/field_violations.h"
#include "core/jobs/job_hosts.h"
#include "core/jobs/rule_actions.h"
#include "core/jobs/validation.h"
#include "core/jobs/validation_text.h"

namespace debugplane::core {
namespace {

using Event = v1::ReportTrainingStatusRequest;

// The job changed into `next`.
JobMutation Changed(std::shared_ptr<JobRecord> next) { return JobMutation{.next = std::move(next)}; }

// Whether the job has a debugging or profiler rule named `name`.
bool HasRuleNamed(const JobRecord& job, const std::string& name) {
  for (const auto& rule : job.debug_rule_configurations()) {
    if (rule.rule_configuration_name() == name) return true;
  }
  for (const auto& rule : job.profiler_rule_configurations()) {
    if (rule.rule_configuration_name() == name) return true;
  }
  return false;
}

// The current status of the job's rule `rule_name`, if it has one.
std::optional<RuleStatus> RuleStatusOf(const JobRecord& job, absl::string_view rule_name) {
  for (const auto& rule : job.debug_rule_evaluation_statuses()) {
    if (rule.rule_configuration_name() == rule_name) return rule.rule_evaluation_status();
  }
  for (const auto& rule : job.profiler_rule_evaluation_statuses()) {
    if (rule.rule_configuration_name() == rule_name) return rule.rule_evaluation_status();
  }
  return std::nullopt;
}

// An update applies only to an InProgress job whose rules it can join: rule
// names stay unique across both lists, 20 profiler rules at most.
absl::Status CheckUpdateApplies(const JobRecord& latest,
                                const v1::UpdateTrainingJobRequest& update) {
  if (latest.training_job_status() != v1::TrainingJobStatus::InProgress) {
    return absl::FailedPreconditionError(
        absl::StrCat("training job '", latest.training_job_name(), "' is ",
                     JobStatusName(latest.training_job_status()),
                     "; UpdateTrainingJob applies only while it is InProgress"));
  }
  FieldViolations violations;
  const int total =
      latest.profiler_rule_configurations_size() + update.profiler_rule_configurations_size();
  if (total > kMaxRulesPerKind) {
    violations.Add("ProfilerRuleConfigurations",
                   absl::StrCat("the job has ", latest.profiler_rule_configurations_size(),
                                " profiler rules; adding ", update.profiler_rule_configurations_size(),
                                " would make ", total, ", more than the limit of ", kMaxRulesPerKind));
  }
  for (int i = 0; i < update.profiler_rule_configurations_size(); ++i) {
    const std::string& name = update.profiler_rule_configurations(i).rule_configuration_name();
    if (HasRuleNamed(latest, name)) {
      violations.Add(absl::StrCat("ProfilerRuleConfigurations[", i, "].RuleConfigurationName"),
                     absl::StrCat("the job already has a rule named '", name, "'"));
    }
  }
  return violations.empty() ? absl::OkStatus() : violations.ToStatus();
}

// Merges an update's ProfilerConfig into the job's: disabling turns
// profiling off; any other change turns it (back) on and sets what it gives.
void MergeProfilerConfig(const v1::ProfilerConfigForUpdate& change, JobRecord& next) {
  v1::ProfilerConfig* config = next.mutable_profiler_config();
  if (change.has_disable_profiler() && change.disable_profiler()) {
    config->set_disable_profiler(true);
    next.set_profiling_status(v1::ProfilingStatus::Disabled);
    return;
  }
  config->set_disable_profiler(false);
  next.set_profiling_status(v1::ProfilingStatus::Enabled);
  if (change.has_profiling_interval_in_milliseconds()) {
    config->set_profiling_interval_in_milliseconds(change.profiling_interval_in_milliseconds());
  }
  if (!change.s3_output_path().empty()) config->set_s3_output_path(change.s3_output_path());
  for (const auto& [key, value] : change.profiling_parameters()) {
    (*config->mutable_profiling_parameters())[key] = value;
  }
}

// Appends the update's profiler rules, each with an InProgress evaluation.
void AddProfilerRules(const v1::UpdateTrainingJobRequest& update, const ArnScope& arn_scope,
                      absl::Time now, JobRecord& next) {
  for (const auto& rule : update.profiler_rule_configurations()) {
    *next.add_profiler_rule_configurations() = rule;
    auto* status = next.add_profiler_rule_evaluation_statuses();
    status->set_rule_configuration_name(rule.rule_configuration_name());
    status->set_rule_evaluation_job_arn(RuleEvaluationJobArn(
        arn_scope, next.training_job_name(), rule.rule_configuration_name(), now));
    status->set_rule_evaluation_status(v1::RuleEvaluationStatus::InProgress);
    SetTimestamp(now, status->mutable_last_modified_time());
  }
}

// EVENT_STOPPED: the training command exited after a stop order.
absl::StatusOr<bool> ApplyStoppedReport(const JobRecord& latest,
                                        const v1::ReportTrainingStatusRequest& request,
                                        absl::Time now, JobRecord& next) {
  if (latest.training_job_status() == v1::TrainingJobStatus::InProgress) {
    return absl::FailedPreconditionError(absl::StrCat(
        "training job '", request.training_job_name(),
        "' is InProgress: no stop was ordered; report the end of a training command "
        "that exited on its own with EVENT_COMPLETED or EVENT_FAILED"));
  }
  return CompleteStop(next, now,
                      request.status_message().empty()
                          ? absl::string_view("the agent reported that the training command exited")
                          : absl::string_view(request.status_message()));
}

// EVENT_CONFIG_APPLIED: the agent wrote configuration version N.
absl::StatusOr<bool> ApplyConfigAppliedReport(const JobRecord& latest,
                                              const v1::ReportTrainingStatusRequest& request,
                                              absl::Time now, JobRecord& next) {
  if (request.applied_config_version() > latest.config_version()) {
    return InvalidField("AppliedConfigVersion",
                        absl::StrCat(request.applied_config_version(),
                                     " is newer than the job's ConfigVersion ",
                                     latest.config_version()));
  }
  return RecordProfilerConfigApplied(next, request.applied_config_version(), now);
}

// EVENT_COMPLETED / EVENT_FAILED: the command ended on its own. While the
// job is Stopping the stop order was on its way: the process is gone, the
// stop is complete.
bool ApplyEndReport(const JobRecord& latest, const v1::ReportTrainingStatusRequest& request,
                    absl::Time now, JobRecord& next) {
  const bool succeeded = request.event() == Event::EVENT_COMPLETED;
  if (latest.training_job_status() == v1::TrainingJobStatus::Stopping) {
    return CompleteStop(next, now,
                        succeeded ? "the training command had exited with code 0 when the stop "
                                    "order reached it"
                                  : absl::StrCat(request.failure_reason(),
                                                 " (before the stop order reached it)"));
  }
  return EndTraining(next, succeeded, request.failure_reason(), now);
}

absl::StatusOr<bool> ApplyJobReportEvent(const JobRecord& latest,
                                         const v1::ReportTrainingStatusRequest& request,
                                         absl::Time now, JobRecord& next);

// Applies the report's event to `next`; whether it changed.
absl::StatusOr<bool> ApplyReportEvent(const JobRecord& latest,
                                      const v1::ReportTrainingStatusRequest& request,
                                      absl::Time now, JobRecord& next) {
  if (request.event() != Event::EVENT_CONFIG_APPLIED) {
    // A multi-host job follows all its hosts (core/jobs/job_hosts.h).
    if (ExpectedHostCount(latest) > 1) return ApplyHostReport(latest, request, now, next);
    const bool in_progress = latest.training_job_status() == v1::TrainingJobStatus::InProgress;
    absl::StatusOr<bool> changed = ApplyJobReportEvent(latest, request, now, next);
    if (!changed.ok()) return changed;
    return RecordSingleHostReport(request, in_progress, now, next) || *changed;
  }
  return ApplyJobReportEvent(latest, request, now, next);
}

// The report's event on a job of one host.
absl::StatusOr<bool> ApplyJobReportEvent(const JobRecord& latest,
                                         const v1::ReportTrainingStatusRequest& request,
                                         absl::Time now, JobRecord& next) {
  switch (request.event()) {
    case Event::EVENT_STARTED:
      // Refused while Stopping (no change; the response says so).
      return MarkTrainingStarted(next, now);
    case Event::EVENT_PROGRESS:
      return SetTrainingStep(next, request.current_step());
    case Event::EVENT_STOPPED:
      return ApplyStoppedReport(latest, request, now, next);
    case Event::EVENT_CONFIG_APPLIED:
      return ApplyConfigAppliedReport(latest, request, now, next);
    default:
      return ApplyEndReport(latest, request, now, next);
  }
}

}  // namespace

std::optional<absl::Time> EarliestDeadline(std::optional<absl::Time> a,
                                           std::optional<absl::Time> b) {
  if (!a.has_value()) return b;
  if (!b.has_value()) return a;
  return std::min(*a, *b);
}

absl::Status JobNotFoundError(absl::string_view job_name) {
  return absl::NotFoundError(absl::StrCat("training job '", job_name, "' does not exist"));
}

absl::StatusOr<JobMutation> CreateJob(const JobRecord* latest,
                                      std::shared_ptr<const JobRecord> record,
                                      std::shared_ptr<const std::string> encoded) {
  if (latest != nullptr) {
    return absl::AlreadyExistsError(
        absl::StrCat("a training job named '", record->training_job_name(),
                     "' already exists; names are unique until the job is deleted"));
  }
  return JobMutation{.next = std::move(record), .encoded = std::move(encoded)};
}

absl::StatusOr<JobMutation> UpdateJob(const JobRecord* latest,
                                      const v1::UpdateTrainingJobRequest& update,
                                      const ArnScope& arn_scope, absl::Time now,
                                      std::vector<std::string>& warnings) {
  if (latest == nullptr) return JobNotFoundError(update.training_job_name());
  if (absl::Status applies = CheckUpdateApplies(*latest, update); !applies.ok()) return applies;
  warnings = UpdateTrainingJobWarnings(update, latest->profiler_config());
  auto next = std::make_shared<JobRecord>(*latest);
  if (update.has_profiler_config()) MergeProfilerConfig(update.profiler_config(), *next);
  AddProfilerRules(update, arn_scope, now, *next);
  next->set_config_version(latest->config_version() + 1);
  SetTimestamp(now, next->mutable_last_modified_time());
  RecordConfigurationUpdate(*next, update, now);
  return Changed(std::move(next));
}

absl::StatusOr<JobMutation> StopJob(const JobRecord* latest, absl::string_view job_name,
                                    absl::Time now, absl::string_view reason) {
  if (latest == nullptr) return JobNotFoundError(job_name);
  auto next = std::make_shared<JobRecord>(*latest);
  // Stopping a job that is stopping or finished is a no-op, as in
  // SageMaker. Stopped follows when the agent reports the process gone (or
  // the wait for that ends).
  if (!BeginStop(*next, now, reason)) return JobMutation::Unchanged();
  return Changed(std::move(next));
}

absl::StatusOr<JobMutation> DeleteJob(const JobRecord* latest, absl::string_view job_name) {
  if (latest == nullptr) return JobNotFoundError(job_name);
  if (!IsTerminal(latest->training_job_status())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "training job '", job_name, "' is ", JobStatusName(latest->training_job_status()),
        "; only Completed, Failed or Stopped jobs can be deleted (stop it first)"));
  }
  return JobMutation{.next = nullptr};
}

DeadlineOutcome ApplyDeadline(const JobRecord* latest, const AgentPresence& presence,
                              const StopWaitLimits& stop_wait, const HostWaitLimits& host_wait,
                              absl::Time now) {
  if (latest == nullptr) return DeadlineOutcome{.mutation = JobMutation::Unchanged()};
  auto next = std::make_shared<JobRecord>(*latest);
  if (latest->training_job_status() == v1::TrainingJobStatus::Stopping) {
    const StopCompletion plan = PlanStopCompletion(*latest, presence, stop_wait);
    if (plan.at <= now && CompleteStop(*next, now, plan.message)) {
      return DeadlineOutcome{.mutation = Changed(std::move(next))};
    }
    return DeadlineOutcome{.mutation = JobMutation::Unchanged(), .next_deadline = plan.at};
  }
  const std::optional<absl::Time> deadline = MaxRuntimeDeadline(*latest);
  if (deadline.has_value() && *deadline <= now && BeginMaxRuntimeStop(*next, now)) {
    return DeadlineOutcome{.mutation = Changed(std::move(next))};
  }
  if (FailForMissingHosts(*next, host_wait, now)) {
    return DeadlineOutcome{.mutation = Changed(std::move(next))};
  }
  return DeadlineOutcome{.mutation = JobMutation::Unchanged(),
                         .next_deadline = EarliestDeadline(deadline,
                                                           HostWaitDeadline(*latest, host_wait))};
}

absl::StatusOr<JobMutation> SetRuleEvaluation(const JobRecord* latest, absl::string_view job_name,
                                              absl::string_view rule_name, RuleStatus status,
                                              absl::string_view details, absl::Time now) {
  if (latest == nullptr) return JobNotFoundError(job_name);
  auto next = std::make_shared<JobRecord>(*latest);
  if (SetRuleStatus(*next, rule_name, status, details, now)) return Changed(std::move(next));
  const std::optional<RuleStatus> current = RuleStatusOf(*latest, rule_name);
  if (!current.has_value()) {
    return absl::NotFoundError(absl::StrCat("training job '", job_name,
                                            "' has no rule configuration named '", rule_name, "'"));
  }
  if (IsTerminal(*current) && *current != status) {
    return absl::FailedPreconditionError(absl::StrCat("rule '", rule_name, "' of training job '",
                                                      job_name, "' already ended as ",
                                                      RuleStatusName(*current)));
  }
  return JobMutation::Unchanged();
}

absl::StatusOr<JobMutation> RecordProgress(const JobRecord* latest, absl::string_view job_name,
                                           const std::vector<RuleProgress>& progress) {
  if (latest == nullptr) return JobNotFoundError(job_name);
  auto next = std::make_shared<JobRecord>(*latest);
  bool changed = false;
  for (const RuleProgress& rule : progress) changed |= SetRuleProgress(*next, rule);
  if (!changed) return JobMutation::Unchanged();
  return Changed(std::move(next));
}

absl::StatusOr<JobMutation> SetActionStatus(const JobRecord* latest, absl::string_view job_name,
                                            absl::string_view action_id,
                                            v1::RuleActionStatus::Value status,
                                            absl::string_view details, int attempts,
                                            absl::Time now) {
  if (latest == nullptr) return JobNotFoundError(job_name);
  auto next = std::make_shared<JobRecord>(*latest);
  if (SetRuleActionStatus(*next, std::string(action_id), status, std::string(details), attempts,
                          now)) {
    return Changed(std::move(next));
  }
  for (const auto& action : latest->rule_actions()) {
    if (action.action_id() != action_id) continue;
    if (action.status() != v1::RuleActionStatus::Pending) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rule action '", action_id, "' is already ", RuleActionStatusName(action.status())));
    }
    return JobMutation::Unchanged();
  }
  return absl::NotFoundError(
      absl::StrCat("training job '", job_name, "' has no rule action '", action_id, "'"));
}

absl::Status ValidateTrainingReport(const v1::ReportTrainingStatusRequest& request) {
  if (request.event() == Event::EVENT_UNSPECIFIED || !Event::Event_IsValid(request.event())) {
    return InvalidField("Event",
                        "is required: EVENT_STARTED, EVENT_PROGRESS, EVENT_COMPLETED, "
                        "EVENT_FAILED, EVENT_STOPPED or EVENT_CONFIG_APPLIED");
  }
  if (request.event() == Event::EVENT_PROGRESS && !request.has_current_step()) {
    return InvalidField("CurrentStep", "is required with EVENT_PROGRESS");
  }
  if (request.has_current_step() && request.current_step() < 0) {
    return InvalidField("CurrentStep", absl::StrCat(request.current_step(),
                                                    " is negative; training steps count from 0"));
  }
  if (request.event() == Event::EVENT_FAILED && request.failure_reason().empty()) {
    return InvalidField("FailureReason", "is required with EVENT_FAILED");
  }
  if (request.host().size() > 128) {
    return InvalidField("Host", absl::StrCat("has ", request.host().size(),
                                             " characters; a host name has at most 128"));
  }
  if (request.event() == Event::EVENT_CONFIG_APPLIED && request.applied_config_version() < 1) {
    return InvalidField("AppliedConfigVersion",
                        "is required with EVENT_CONFIG_APPLIED and counts from 1");
  }
  return absl::OkStatus();
}

v1::ReportTrainingStatusRequest BoundTrainingReport(
    const v1::ReportTrainingStatusRequest& request) {
  // A megabyte FailureReason would otherwise be copied into the record (and
  // every reply that shows it).
  v1::ReportTrainingStatusRequest bounded = request;
  bounded.set_failure_reason(CutToChars(request.failure_reason(), kMaxStatusTextChars));
  bounded.set_status_message(CutToChars(request.status_message(), kMaxStatusTextChars));
  bounded.clear_upload_backlog();  // Not kept by the server.
  return bounded;
}

absl::StatusOr<JobMutation> ApplyTrainingReport(const JobRecord* latest,
                                                const v1::ReportTrainingStatusRequest& request,
                                                absl::Time now,
                                                v1::TrainingJobStatus::Value& status) {
  if (latest == nullptr) return JobNotFoundError(request.training_job_name());
  auto next = std::make_shared<JobRecord>(*latest);
  absl::StatusOr<bool> changed = ApplyReportEvent(*latest, request, now, *next);
  if (!changed.ok()) return changed.status();
  if (*changed) SetTimestamp(now, next->mutable_last_modified_time());
  status = next->training_job_status();
  if (!*changed) return JobMutation::Unchanged();
  return Changed(std::move(next));
}

}  // namespace debugplane::core
