#include "service/dashboard/job_summary.h"

#include <map>

namespace debugplane::service::dashboard {
namespace {

std::optional<absl::Time> TimeOf(bool present, const google::protobuf::Timestamp& timestamp) {
  if (!present) return std::nullopt;
  return absl::FromUnixSeconds(timestamp.seconds()) + absl::Nanoseconds(timestamp.nanos());
}

}  // namespace

nlohmann::json EpochSeconds(std::optional<absl::Time> time) {
  if (!time.has_value()) return nullptr;
  return absl::ToDoubleSeconds(*time - absl::UnixEpoch());
}

std::string Dump(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json JobSummary(const core::JobRecord& job, std::optional<absl::Time> last_data_time) {
  std::map<std::string, int> verdicts = {{"InProgress", 0},  {"NoIssuesFound", 0},
                                         {"IssuesFound", 0}, {"Error", 0},
                                         {"Stopping", 0},    {"Stopped", 0}};
  auto count = [&](core::RuleStatus status) {
    if (status == v1::RuleEvaluationStatus::RULE_EVALUATION_STATUS_UNSPECIFIED) return;
    ++verdicts[v1::RuleEvaluationStatus::Value_Name(status)];
  };
  for (const auto& rule : job.debug_rule_evaluation_statuses()) {
    count(rule.rule_evaluation_status());
  }
  for (const auto& rule : job.profiler_rule_evaluation_statuses()) {
    count(rule.rule_evaluation_status());
  }
  nlohmann::json current_step = nullptr;
  if (job.has_progress_info() && job.progress_info().has_current_step()) {
    current_step = job.progress_info().current_step();
  }
  return {
      {"name", job.training_job_name()},
      {"status", v1::TrainingJobStatus::Value_Name(job.training_job_status())},
      {"secondaryStatus", v1::SecondaryStatus::Value_Name(job.secondary_status())},
      {"creationTime", EpochSeconds(TimeOf(job.has_creation_time(), job.creation_time()))},
      {"trainingStartTime",
       EpochSeconds(TimeOf(job.has_training_start_time(), job.training_start_time()))},
      {"trainingEndTime",
       EpochSeconds(TimeOf(job.has_training_end_time(), job.training_end_time()))},
      {"lastModifiedTime",
       EpochSeconds(TimeOf(job.has_last_modified_time(), job.last_modified_time()))},
      {"lastDataTime", EpochSeconds(last_data_time)},
      {"verdicts", verdicts},
      {"currentStep", current_step},
      {"profilingStatus", v1::ProfilingStatus::Value_Name(job.profiling_status())},
      {"configVersion", job.config_version()},
      // When the agent reported writing the job's profilerconfig.json
      // (ReportTrainingStatus EVENT_CONFIG_APPLIED).
      {"profilerConfigAppliedTime", EpochSeconds(TimeOf(job.has_profiler_config_applied_time(),
                                                        job.profiler_config_applied_time()))},
  };
}

}  // namespace debugplane::service::dashboard
