#include "core/jobs/job_record.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "core/jobs/rule_actions.h"
#include "core/jobs/validation_text.h"

namespace debugplane::core {
namespace {

constexpr size_t kMaxProcessingJobNameLength = 63;

// FNV-1a: stable across processes and builds (absl::Hash is seeded per run).
uint32_t Fnv1a(absl::string_view data, uint32_t hash = 2166136261u) {
  for (unsigned char c : data) {
    hash ^= c;
    hash *= 16777619u;
  }
  return hash;
}

// Keeps [a-zA-Z0-9], maps everything else to '-', squeezes and trims dashes.
std::string ToNameToken(absl::string_view in) {
  std::string out;
  for (char c : in) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) != 0;
    if (ok) {
      out.push_back(c);
    } else if (!out.empty() && out.back() != '-') {
      out.push_back('-');
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

// Joins an output location and a relative suffix with one '/'.
std::string JoinPath(absl::string_view base, absl::string_view suffix) {
  absl::string_view trimmed = base;
  while (absl::ConsumeSuffix(&trimmed, "/")) {
  }
  return absl::StrCat(trimmed, "/", suffix);
}

template <typename RuleStatusMessage>
RuleStatusMessage* FindRule(google::protobuf::RepeatedPtrField<RuleStatusMessage>* statuses,
                            absl::string_view rule) {
  for (auto& status : *statuses) {
    if (status.rule_configuration_name() == rule) return &status;
  }
  return nullptr;
}

template <typename RuleStatusMessage>
void DiffRules(const google::protobuf::RepeatedPtrField<RuleStatusMessage>& before,
               const google::protobuf::RepeatedPtrField<RuleStatusMessage>& after,
               v1::StatusChange::Kind kind, std::vector<v1::StatusChange>& changes) {
  for (const auto& now : after) {
    const RuleStatusMessage* was = nullptr;
    for (const auto& candidate : before) {
      if (candidate.rule_configuration_name() == now.rule_configuration_name()) {
        was = &candidate;
        break;
      }
    }
    if (was != nullptr && was->rule_evaluation_status() == now.rule_evaluation_status() &&
        was->status_details() == now.status_details()) {
      continue;
    }
    v1::StatusChange change;
    change.set_kind(kind);
    change.set_rule_configuration_name(now.rule_configuration_name());
    if (was != nullptr) change.set_from(std::string(RuleStatusName(was->rule_evaluation_status())));
    change.set_to(std::string(RuleStatusName(now.rule_evaluation_status())));
    change.set_details(now.status_details());
    changes.push_back(std::move(change));
  }
}

// Training is over: TrainingEndTime, and TrainingTimeInSeconds if it began.
void EndTrainingTime(JobRecord& job, absl::Time now) {
  SetTimestamp(now, job.mutable_training_end_time());
  if (job.has_training_start_time()) {
    job.set_training_time_in_seconds(
        static_cast<int32_t>(absl::ToInt64Seconds(now - ToAbslTime(job.training_start_time()))));
  }
}

}  // namespace

void SetTimestamp(absl::Time time, google::protobuf::Timestamp* out) {
  const int64_t micros = absl::ToUnixMicros(time);
  int64_t seconds = micros / 1000000;
  int64_t rest = micros % 1000000;
  if (rest < 0) {
    rest += 1000000;
    --seconds;
  }
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(rest * 1000));
}

absl::Time ToAbslTime(const google::protobuf::Timestamp& timestamp) {
  return absl::FromUnixSeconds(timestamp.seconds()) + absl::Nanoseconds(timestamp.nanos());
}

int64_t ToUnixMicros(const google::protobuf::Timestamp& timestamp) {
  return timestamp.seconds() * 1000000 + timestamp.nanos() / 1000;
}

std::string TrainingJobArn(const ArnScope& scope, absl::string_view job_name) {
  return absl::StrCat("arn:", scope.partition, ":sagemaker:", scope.region, ":", scope.account,
                      ":training-job/", job_name);
}

std::string RuleEvaluationJobArn(const ArnScope& scope, absl::string_view job_name,
                                 absl::string_view rule_name, absl::Time creation_time) {
  const uint32_t hash =
      Fnv1a(rule_name, Fnv1a(absl::StrCat(job_name, "/", absl::ToUnixMicros(creation_time), "/")));
  const std::string suffix = absl::StrFormat("-%08x", hash);
  std::string job_token = ToNameToken(job_name);
  std::string rule_token = ToNameToken(rule_name);
  // Share the room left by the hash between job and rule, job first.
  const size_t room = kMaxProcessingJobNameLength - suffix.size();
  if (job_token.size() + 1 + rule_token.size() > room) {
    const size_t job_room = std::min(job_token.size(), room / 2);
    job_token.resize(job_room);
    rule_token.resize(std::min(rule_token.size(), room - job_room - 1));
  }
  while (!job_token.empty() && job_token.back() == '-') job_token.pop_back();
  while (!rule_token.empty() && rule_token.back() == '-') rule_token.pop_back();
  std::string name = job_token;
  if (!rule_token.empty()) absl::StrAppend(&name, name.empty() ? "" : "-", rule_token);
  if (name.empty()) name = "rule";
  return absl::StrCat("arn:", scope.partition, ":sagemaker:", scope.region, ":", scope.account,
                      ":processing-job/", name, suffix);
}

namespace {

// The request's members a job record keeps as they were sent (with
// SageMaker's default MaxRuntimeInSeconds).
void CopyRequestMembers(const v1::CreateTrainingJobRequest& request, JobRecord& job) {
  job.set_role_arn(request.role_arn());
  if (request.has_algorithm_specification()) {
    *job.mutable_algorithm_specification() = request.algorithm_specification();
  }
  *job.mutable_hyper_parameters() = request.hyper_parameters();
  *job.mutable_input_data_config() = request.input_data_config();
  *job.mutable_output_data_config() = request.output_data_config();
  if (request.has_resource_config()) *job.mutable_resource_config() = request.resource_config();
  // StoppingCondition is required in Describe output; SageMaker's default
  // MaxRuntimeInSeconds is one day.
  *job.mutable_stopping_condition() = request.stopping_condition();
  if (!job.stopping_condition().has_max_runtime_in_seconds()) {
    job.mutable_stopping_condition()->set_max_runtime_in_seconds(86400);
  }
  *job.mutable_tags() = request.tags();
  *job.mutable_environment() = request.environment();
  if (request.has_checkpoint_config()) {
    *job.mutable_checkpoint_config() = request.checkpoint_config();
  }
  if (request.has_debug_hook_config()) {
    *job.mutable_debug_hook_config() = request.debug_hook_config();
  }
  *job.mutable_debug_rule_configurations() = request.debug_rule_configurations();
  if (request.has_tensor_board_output_config()) {
    *job.mutable_tensor_board_output_config() = request.tensor_board_output_config();
  }
  *job.mutable_profiler_rule_configurations() = request.profiler_rule_configurations();
  job.set_enable_network_isolation(request.enable_network_isolation());
  job.set_enable_inter_container_traffic_encryption(
      request.enable_inter_container_traffic_encryption());
  job.set_enable_managed_spot_training(request.enable_managed_spot_training());
  if (request.has_vpc_config()) *job.mutable_vpc_config() = request.vpc_config();
  if (request.has_experiment_config()) {
    *job.mutable_experiment_config() = request.experiment_config();
  }
  if (request.has_retry_strategy()) *job.mutable_retry_strategy() = request.retry_strategy();
}

// Profiling is on by default in SageMaker (system monitoring every 500 ms),
// with output next to the model unless the request says otherwise.
void SetProfilerConfig(const v1::CreateTrainingJobRequest& request, JobRecord& job) {
  const std::string& output = request.output_data_config().s3_output_path();
  v1::ProfilerConfig* profiler = job.mutable_profiler_config();
  if (request.has_profiler_config()) *profiler = request.profiler_config();
  if (!profiler->has_profiling_interval_in_milliseconds()) {
    profiler->set_profiling_interval_in_milliseconds(kDefaultProfilingIntervalMs);
  }
  if (profiler->s3_output_path().empty()) {
    profiler->set_s3_output_path(
        JoinPath(output, absl::StrCat(request.training_job_name(), "/profiler-output")));
  }
  job.set_profiling_status(profiler->disable_profiler() ? v1::ProfilingStatus::Disabled
                                                        : v1::ProfilingStatus::Enabled);
}

// An InProgress evaluation status, with its processing-job ARN, for each of
// `rules` (DebugRuleConfigurations or ProfilerRuleConfigurations).
template <typename Rules, typename Statuses>
void AddInProgressStatuses(const Rules& rules, Statuses& statuses, const ArnScope& scope,
                           const std::string& job_name, absl::Time now) {
  for (const auto& rule : rules) {
    auto* status = statuses.Add();
    status->set_rule_configuration_name(rule.rule_configuration_name());
    status->set_rule_evaluation_job_arn(
        RuleEvaluationJobArn(scope, job_name, rule.rule_configuration_name(), now));
    status->set_rule_evaluation_status(v1::RuleEvaluationStatus::InProgress);
    SetTimestamp(now, status->mutable_last_modified_time());
  }
}

}  // namespace

JobRecord NewJobRecord(const v1::CreateTrainingJobRequest& request, const ArnScope& scope,
                       absl::Time now) {
  JobRecord job;
  job.set_training_job_name(request.training_job_name());
  job.set_training_job_arn(TrainingJobArn(scope, request.training_job_name()));
  CopyRequestMembers(request, job);
  SetProfilerConfig(request, job);
  SetTimestamp(now, job.mutable_creation_time());
  SetTimestamp(now, job.mutable_last_modified_time());
  job.set_training_job_status(v1::TrainingJobStatus::InProgress);
  TransitionSecondaryStatus(job, v1::SecondaryStatus::Starting,
                            "Waiting for a training host (debugplane-agent) to start training",
                            now);
  AddInProgressStatuses(request.debug_rule_configurations(),
                        *job.mutable_debug_rule_evaluation_statuses(), scope,
                        request.training_job_name(), now);
  AddInProgressStatuses(request.profiler_rule_configurations(),
                        *job.mutable_profiler_rule_evaluation_statuses(), scope,
                        request.training_job_name(), now);
  job.set_config_version(1);
  return job;
}

bool BoundStoredTexts(JobRecord& job) {
  bool cut = false;
  // Cuts `*text` in place if it is longer than the bound.
  const auto bound = [&cut](std::string* text) {
    if (text->size() <= kMaxStatusTextChars) return;  // Bytes >= characters.
    std::string bounded = CutToChars(*text, kMaxStatusTextChars);
    if (bounded.size() == text->size()) return;
    *text = std::move(bounded);
    cut = true;
  };
  bound(job.mutable_failure_reason());
  for (auto& transition : *job.mutable_secondary_status_transitions()) {
    bound(transition.mutable_status_message());
  }
  for (auto& rule : *job.mutable_debug_rule_evaluation_statuses()) {
    bound(rule.mutable_status_details());
  }
  for (auto& rule : *job.mutable_profiler_rule_evaluation_statuses()) {
    bound(rule.mutable_status_details());
  }
  return cut;
}

void TransitionSecondaryStatus(JobRecord& job, SecondaryStatus status, absl::string_view message,
                               absl::Time now) {
  auto* transitions = job.mutable_secondary_status_transitions();
  if (!transitions->empty() && transitions->rbegin()->status() == status &&
      job.secondary_status() == status) {
    return;
  }
  if (!transitions->empty()) {
    SetTimestamp(now, transitions->rbegin()->mutable_end_time());
  }
  auto* transition = job.add_secondary_status_transitions();
  transition->set_status(status);
  SetTimestamp(now, transition->mutable_start_time());
  transition->set_status_message(CutToChars(message, kMaxStatusTextChars));
  job.set_secondary_status(status);
  SetTimestamp(now, job.mutable_last_modified_time());
}

bool BeginStop(JobRecord& job, absl::Time now, absl::string_view reason) {
  if (job.training_job_status() != v1::TrainingJobStatus::InProgress) return false;
  job.set_training_job_status(v1::TrainingJobStatus::Stopping);
  TransitionSecondaryStatus(job, v1::SecondaryStatus::Stopping,
                            reason.empty() ? "Stopping the training job" : reason, now);
  for (auto& rule : *job.mutable_debug_rule_evaluation_statuses()) {
    if (rule.rule_evaluation_status() == v1::RuleEvaluationStatus::InProgress) {
      rule.set_rule_evaluation_status(v1::RuleEvaluationStatus::Stopping);
      SetTimestamp(now, rule.mutable_last_modified_time());
    }
  }
  for (auto& rule : *job.mutable_profiler_rule_evaluation_statuses()) {
    if (rule.rule_evaluation_status() == v1::RuleEvaluationStatus::InProgress) {
      rule.set_rule_evaluation_status(v1::RuleEvaluationStatus::Stopping);
      SetTimestamp(now, rule.mutable_last_modified_time());
    }
  }
  return true;
}

void RecordConfigurationUpdate(JobRecord& job, const v1::UpdateTrainingJobRequest& update,
                               absl::Time now) {
  constexpr int kKeptUpdates = 100;
  auto* updates = job.mutable_configuration_updates();
  if (updates->size() >= kKeptUpdates) {
    updates->DeleteSubrange(0, updates->size() - kKeptUpdates + 1);
  }
  v1::ConfigurationUpdate* recorded = updates->Add();
  recorded->set_config_version(job.config_version());
  SetTimestamp(now, recorded->mutable_update_time());
  if (update.has_profiler_config()) *recorded->mutable_profiler_config() = update.profiler_config();
  for (const auto& rule : update.profiler_rule_configurations()) {
    recorded->add_added_profiler_rules(rule.rule_configuration_name());
  }
}

bool RecordProfilerConfigApplied(JobRecord& job, int64_t version, absl::Time now) {
  if (IsTerminal(job.training_job_status()) || version <= job.profiler_config_applied_version()) {
    return false;
  }
  job.set_profiler_config_applied_version(version);
  SetTimestamp(now, job.mutable_profiler_config_applied_time());
  return true;
}

bool MarkTrainingStarted(JobRecord& job, absl::Time now) {
  if (job.training_job_status() != v1::TrainingJobStatus::InProgress ||
      job.secondary_status() == v1::SecondaryStatus::Training) {
    return false;
  }
  TransitionSecondaryStatus(job, v1::SecondaryStatus::Training, "Training the model", now);
  if (!job.has_training_start_time()) SetTimestamp(now, job.mutable_training_start_time());
  return true;
}

bool SetTrainingStep(JobRecord& job, int64_t step) {
  if (job.training_job_status() != v1::TrainingJobStatus::InProgress) return false;
  if (job.progress_info().has_current_step() && job.progress_info().current_step() >= step) {
    return false;
  }
  job.mutable_progress_info()->set_current_step(step);
  return true;
}

bool EndTraining(JobRecord& job, bool succeeded, absl::string_view failure_reason, absl::Time now) {
  if (job.training_job_status() != v1::TrainingJobStatus::InProgress) return false;
  if (succeeded) {
    job.set_training_job_status(v1::TrainingJobStatus::Completed);
    TransitionSecondaryStatus(job, v1::SecondaryStatus::Completed, "Training job completed", now);
    job.mutable_model_artifacts()->set_s3_model_artifacts(
        JoinPath(job.output_data_config().s3_output_path(),
                 absl::StrCat(job.training_job_name(), "/output/model.tar.gz")));
  } else {
    job.set_training_job_status(v1::TrainingJobStatus::Failed);
    job.set_failure_reason(CutToChars(failure_reason, kMaxStatusTextChars));
    TransitionSecondaryStatus(job, v1::SecondaryStatus::Failed, failure_reason, now);
  }
  EndTrainingTime(job, now);
  return true;
}

std::optional<absl::Time> MaxRuntimeDeadline(const JobRecord& job) {
  if (job.training_job_status() != v1::TrainingJobStatus::InProgress) return std::nullopt;
  if (!job.stopping_condition().has_max_runtime_in_seconds() ||
      job.stopping_condition().max_runtime_in_seconds() <= 0) {
    return std::nullopt;
  }
  const absl::Time from = job.has_training_start_time() ? ToAbslTime(job.training_start_time())
                                                        : ToAbslTime(job.creation_time());
  return from + absl::Seconds(job.stopping_condition().max_runtime_in_seconds());
}

bool BeginMaxRuntimeStop(JobRecord& job, absl::Time now) {
  if (job.training_job_status() != v1::TrainingJobStatus::InProgress) return false;
  const std::string reason = absl::StrCat("Training job exceeded MaxRuntimeInSeconds of ",
                                          job.stopping_condition().max_runtime_in_seconds(), " s");
  BeginStop(job, now, reason);
  job.set_failure_reason(reason);
  return true;
}

bool StoppedForMaxRuntime(const JobRecord& job) {
  const JobStatus status = job.training_job_status();
  return (status == v1::TrainingJobStatus::Stopping || status == v1::TrainingJobStatus::Stopped) &&
         !job.failure_reason().empty();
}

absl::Time StopOrderTime(const JobRecord& job) {
  for (auto it = job.secondary_status_transitions().rbegin();
       it != job.secondary_status_transitions().rend(); ++it) {
    if (it->status() == v1::SecondaryStatus::Stopping) return ToAbslTime(it->start_time());
  }
  return ToAbslTime(job.last_modified_time());
}

StopCompletion PlanStopCompletion(const JobRecord& job, const AgentPresence& agents,
                                  const StopWaitLimits& limits) {
  const absl::Time ordered = StopOrderTime(job);
  if (agents.connected == 0 && !job.has_training_start_time()) {
    return {ordered,
            "the training had not started (no agent had started the training command): "
            "nothing to stop"};
  }
  StopCompletion unconfirmed{
      ordered + limits.for_agent,
      absl::StrCat("the agent did not confirm within ", absl::FormatDuration(limits.for_agent),
                   " of the stop order that the training process exited")};
  if (agents.connected > 0) return unconfirmed;
  const absl::Time absent_at = std::max(ordered, agents.absent_since) + limits.without_agent;
  if (unconfirmed.at <= absent_at) return unconfirmed;
  return {absent_at,
          absl::StrCat("no agent was connected to stop the training process (waited ",
                       absl::FormatDuration(limits.without_agent),
                       " for one to reconnect); an agent that reconnects later still stops it")};
}

bool CompleteStop(JobRecord& job, absl::Time now, absl::string_view how) {
  if (job.training_job_status() != v1::TrainingJobStatus::Stopping) return false;
  job.set_training_job_status(v1::TrainingJobStatus::Stopped);
  TransitionSecondaryStatus(job,
                            StoppedForMaxRuntime(job) ? v1::SecondaryStatus::MaxRuntimeExceeded
                                                      : v1::SecondaryStatus::Stopped,
                            how.empty() ? "The training job was stopped" : how, now);
  EndTrainingTime(job, now);
  auto finish = [&](auto& rule) {
    if (!IsTerminal(rule.rule_evaluation_status())) {
      rule.set_rule_evaluation_status(v1::RuleEvaluationStatus::Stopped);
      SetTimestamp(now, rule.mutable_last_modified_time());
    }
  };
  for (auto& rule : *job.mutable_debug_rule_evaluation_statuses()) finish(rule);
  for (auto& rule : *job.mutable_profiler_rule_evaluation_statuses()) finish(rule);
  return true;
}

bool SetRuleStatus(JobRecord& job, absl::string_view rule, RuleStatus status,
                   absl::string_view details, absl::Time now) {
  // StatusDetails is at most 1024 characters in SageMaker's shape; compared
  // as stored, so the same long details are no change.
  const std::string bounded = CutToChars(details, kMaxStatusTextChars);
  auto apply = [&](auto* target) {
    if (IsTerminal(target->rule_evaluation_status())) return false;
    if (target->rule_evaluation_status() == status && target->status_details() == bounded) {
      return false;
    }
    target->set_rule_evaluation_status(status);
    target->set_status_details(bounded);
    SetTimestamp(now, target->mutable_last_modified_time());
    SetTimestamp(now, job.mutable_last_modified_time());
    return true;
  };
  if (auto* debug = FindRule(job.mutable_debug_rule_evaluation_statuses(), rule)) {
    if (!apply(debug)) return false;
    // The actions become durable in the same write as the status, so they
    // are carried out once: never lost, never triggered again.
    if (status == v1::RuleEvaluationStatus::IssuesFound) RecordTriggeredActions(job, rule, now);
    return true;
  }
  if (auto* profiler = FindRule(job.mutable_profiler_rule_evaluation_statuses(), rule)) {
    return apply(profiler);
  }
  return false;
}

bool SetRuleProgress(JobRecord& job, absl::string_view rule, int64_t last_evaluated_step) {
  auto* target = FindRule(job.mutable_debug_rule_evaluation_statuses(), rule);
  if (target == nullptr || IsTerminal(target->rule_evaluation_status())) return false;
  if (target->has_last_evaluated_step() && target->last_evaluated_step() >= last_evaluated_step) {
    return false;
  }
  target->set_last_evaluated_step(last_evaluated_step);
  return true;
}

bool SetRuleProgress(JobRecord& job, const RuleProgress& progress) {
  auto set_read = [&progress](auto* target) {
    if (!progress.read.has_value() || IsTerminal(target->rule_evaluation_status())) return false;
    const v1::RuleReadProgress& now = target->read_progress();
    const v1::RuleReadProgress& given = *progress.read;
    if (target->has_read_progress() && now.bytes_read() == given.bytes_read() &&
        now.objects_read() == given.objects_read() &&
        now.has_last_step_read() == given.has_last_step_read() &&
        now.last_step_read() == given.last_step_read()) {
      return false;
    }
    *target->mutable_read_progress() = *progress.read;
    return true;
  };
  if (auto* debug = FindRule(job.mutable_debug_rule_evaluation_statuses(), progress.rule)) {
    bool changed = progress.last_evaluated_step >= 0 &&
                   SetRuleProgress(job, progress.rule, progress.last_evaluated_step);
    changed |= set_read(debug);
    return changed;
  }
  if (auto* profiler = FindRule(job.mutable_profiler_rule_evaluation_statuses(), progress.rule)) {
    return set_read(profiler);
  }
  return false;
}

bool IsTerminal(JobStatus status) {
  return status == v1::TrainingJobStatus::Completed || status == v1::TrainingJobStatus::Failed ||
         status == v1::TrainingJobStatus::Stopped;
}

bool IsTerminal(RuleStatus status) {
  return status == v1::RuleEvaluationStatus::NoIssuesFound ||
         status == v1::RuleEvaluationStatus::IssuesFound ||
         status == v1::RuleEvaluationStatus::Error || status == v1::RuleEvaluationStatus::Stopped;
}

bool IsSettled(const JobRecord& job) {
  if (!IsTerminal(job.training_job_status())) return false;
  for (const auto& rule : job.debug_rule_evaluation_statuses()) {
    if (!IsTerminal(rule.rule_evaluation_status())) return false;
  }
  for (const auto& rule : job.profiler_rule_evaluation_statuses()) {
    if (!IsTerminal(rule.rule_evaluation_status())) return false;
  }
  return !HasPendingActions(job);
}

absl::string_view JobStatusName(JobStatus status) {
  return v1::TrainingJobStatus::Value_Name(status);
}
absl::string_view SecondaryStatusName(SecondaryStatus status) {
  return v1::SecondaryStatus::Value_Name(status);
}
absl::string_view RuleStatusName(RuleStatus status) {
  return v1::RuleEvaluationStatus::Value_Name(status);
}

namespace {

// What a watcher reads about a configuration change: the profiling status
// and what the last update changed.
std::string ConfigurationDetails(const JobRecord& job) {
  std::string details =
      absl::StrCat("ProfilingStatus ", v1::ProfilingStatus::Value_Name(job.profiling_status()));
  if (job.configuration_updates().empty()) return details;
  const v1::ConfigurationUpdate& update = *job.configuration_updates().rbegin();
  const v1::ProfilerConfigForUpdate& config = update.profiler_config();
  if (config.has_profiling_interval_in_milliseconds()) {
    absl::StrAppend(&details, "; ProfilingIntervalInMilliseconds ",
                    config.profiling_interval_in_milliseconds());
  }
  for (const auto& [key, value] : config.profiling_parameters()) {
    absl::StrAppend(&details, "; ", key, " ", value);
  }
  if (!update.added_profiler_rules().empty()) {
    absl::StrAppend(&details, "; added ", absl::StrJoin(update.added_profiler_rules(), ", "));
  }
  return details;
}

}  // namespace

std::vector<v1::StatusChange> DiffForWatch(const JobRecord& before, const JobRecord& after) {
  std::vector<v1::StatusChange> changes;
  if (before.training_job_status() != after.training_job_status() ||
      before.secondary_status() != after.secondary_status()) {
    v1::StatusChange change;
    change.set_kind(v1::StatusChange::KIND_JOB_STATUS);
    change.set_from(absl::StrCat(JobStatusName(before.training_job_status()), "/",
                                 SecondaryStatusName(before.secondary_status())));
    change.set_to(absl::StrCat(JobStatusName(after.training_job_status()), "/",
                               SecondaryStatusName(after.secondary_status())));
    if (!after.failure_reason().empty()) {
      change.set_details(after.failure_reason());
    } else if (!after.secondary_status_transitions().empty()) {
      change.set_details(after.secondary_status_transitions().rbegin()->status_message());
    }
    changes.push_back(std::move(change));
  }
  DiffRules(before.debug_rule_evaluation_statuses(), after.debug_rule_evaluation_statuses(),
            v1::StatusChange::KIND_DEBUG_RULE_STATUS, changes);
  DiffRules(before.profiler_rule_evaluation_statuses(), after.profiler_rule_evaluation_statuses(),
            v1::StatusChange::KIND_PROFILER_RULE_STATUS, changes);
  if (before.config_version() != after.config_version()) {
    v1::StatusChange change;
    change.set_kind(v1::StatusChange::KIND_CONFIGURATION);
    change.set_from(absl::StrCat(before.config_version()));
    change.set_to(absl::StrCat(after.config_version()));
    change.set_details(ConfigurationDetails(after));
    changes.push_back(std::move(change));
  }
  for (const auto& now : after.rule_actions()) {
    const v1::RuleAction* was = nullptr;
    for (const auto& candidate : before.rule_actions()) {
      if (candidate.action_id() == now.action_id()) was = &candidate;
    }
    if (was != nullptr && was->status() == now.status() && was->attempts() == now.attempts() &&
        was->details() == now.details()) {
      continue;
    }
    v1::StatusChange change;
    change.set_kind(v1::StatusChange::KIND_RULE_ACTION);
    change.set_rule_configuration_name(now.rule_configuration_name());
    if (was != nullptr) change.set_from(std::string(RuleActionStatusName(was->status())));
    change.set_to(std::string(RuleActionStatusName(now.status())));
    change.set_details(absl::StrCat(now.action(), " ", now.target(),
                                    now.details().empty() ? "" : ": ", now.details()));
    changes.push_back(std::move(change));
  }
  if (before.progress_info().SerializeAsString() != after.progress_info().SerializeAsString()) {
    v1::StatusChange change;
    change.set_kind(v1::StatusChange::KIND_PROGRESS);
    if (after.progress_info().has_current_step()) {
      change.set_to(absl::StrCat("step ", after.progress_info().current_step()));
    }
    changes.push_back(std::move(change));
  }
  return changes;
}

v1::WatchTrainingJobResponse MakeWatchEvent(const JobRecord& job,
                                            std::vector<v1::StatusChange> changes,
                                            absl::Time event_time) {
  v1::WatchTrainingJobResponse event;
  SetTimestamp(event_time, event.mutable_event_time());
  for (auto& change : changes) *event.add_changes() = std::move(change);
  event.set_training_job_name(job.training_job_name());
  event.set_training_job_status(job.training_job_status());
  event.set_secondary_status(job.secondary_status());
  event.set_failure_reason(job.failure_reason());
  *event.mutable_debug_rule_evaluation_statuses() = job.debug_rule_evaluation_statuses();
  *event.mutable_profiler_rule_evaluation_statuses() = job.profiler_rule_evaluation_statuses();
  event.set_profiling_status(job.profiling_status());
  event.set_config_version(job.config_version());
  *event.mutable_last_modified_time() = job.last_modified_time();
  *event.mutable_rule_actions() = job.rule_actions();
  return event;
}

}  // namespace debugplane::core
