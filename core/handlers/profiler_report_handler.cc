#include "core/handlers/profiler_report_handler.h"

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/atomic_file.h"
#include "core/jobs/field_violations.h"
#include "core/jobs/job_record.h"
#include "core/handlers/profiler_report_files.h"
#include "core/jobs/validation.h"
#include "spdlog/spdlog.h"

namespace debugplane::core {
namespace {

constexpr char kProfilerReportRule[] = "ProfilerReport";
constexpr char kXgboostReportRule[] = "CreateXgboostReport";

template <typename Config>
bool Invokes(const Config& config, absl::string_view rule) {
  const auto it = config.rule_parameters().find("rule_to_invoke");
  return it != config.rule_parameters().end() && it->second == rule;
}

// A rule of the job that writes a report: a ProfilerRuleConfigurations
// ProfilerReport or a DebugRuleConfigurations CreateXgboostReport.
struct ReportRule {
  std::string name;
  RuleStatus status = v1::RuleEvaluationStatus::RULE_EVALUATION_STATUS_UNSPECIFIED;
  std::string stem;  // Its files' stem (profiler_report_files.h).
};

// Every rule of `job` that writes a report, named `only` if not empty;
// `found_other` is set when a rule of that name exists but writes none.
std::vector<ReportRule> ReportRules(const JobRecord& job, const std::string& only,
                                    bool* found_other) {
  std::vector<ReportRule> out;
  for (int i = 0; i < job.profiler_rule_configurations_size(); ++i) {
    const auto& config = job.profiler_rule_configurations(i);
    if (!only.empty() && config.rule_configuration_name() != only) continue;
    if (!Invokes(config, kProfilerReportRule)) {
      *found_other = true;
      continue;
    }
    out.push_back({config.rule_configuration_name(),
                   i < job.profiler_rule_evaluation_statuses_size()
                       ? job.profiler_rule_evaluation_statuses(i).rule_evaluation_status()
                       : v1::RuleEvaluationStatus::RULE_EVALUATION_STATUS_UNSPECIFIED,
                   "profiler-report"});
  }
  for (int i = 0; i < job.debug_rule_configurations_size(); ++i) {
    const auto& config = job.debug_rule_configurations(i);
    if (!only.empty() && config.rule_configuration_name() != only) continue;
    if (!Invokes(config, kXgboostReportRule)) {
      *found_other = true;
      continue;
    }
    out.push_back({config.rule_configuration_name(),
                   i < job.debug_rule_evaluation_statuses_size()
                       ? job.debug_rule_evaluation_statuses(i).rule_evaluation_status()
                       : v1::RuleEvaluationStatus::RULE_EVALUATION_STATUS_UNSPECIFIED,
                   "xgboost_report"});
  }
  return out;
}

// The rule `request` names (or the job's only report rule), or the error
// to return.
absl::StatusOr<ReportRule> FindReportRule(const JobRecord& job,
                                          const v1::GetProfilerReportRequest& request) {
  const std::string& job_name = job.training_job_name();
  const std::string& named = request.rule_configuration_name();
  bool found_other = false;
  std::vector<ReportRule> reports = ReportRules(job, named, &found_other);
  if (!named.empty()) {
    if (!reports.empty()) return reports.front();
    if (found_other) {
      return InvalidField(
          "RuleConfigurationName",
          absl::StrCat("rule '", named, "' of training job '", job_name,
                       "' is not a ProfilerReport rule; only ProfilerReport (and the debugging "
                       "rule CreateXgboostReport) writes a report"));
    }
    return absl::NotFoundError(absl::StrCat("training job '", job_name,
                                            "' has no profiler rule named '", named,
                                            "' (nor a CreateXgboostReport debugging rule)"));
  }
  if (reports.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "training job '", job_name,
        "' has no ProfilerReport rule, so no report; add a ProfilerRuleConfigurations entry with "
        "RuleParameters {\"rule_to_invoke\": \"ProfilerReport\"} (UpdateTrainingJob can add it "
        "while the job runs), or a DebugRuleConfigurations entry with {\"rule_to_invoke\": "
        "\"CreateXgboostReport\"} for the XGBoost training report"));
  }
  if (reports.size() > 1) {
    std::vector<std::string> names;
    for (const ReportRule& r : reports) names.push_back(r.name);
    return absl::FailedPreconditionError(
        absl::StrCat("training job '", job_name, "' has several report rules (",
                     absl::StrJoin(names, ", "), "); name one in RuleConfigurationName"));
  }
  return reports.front();
}

}  // namespace

ProfilerReportHandler::ProfilerReportHandler(TrainingJobManager* manager,
                                             std::filesystem::path report_dir,
                                             persistence::ReportStore* store)
    : manager_(manager), report_dir_(std::move(report_dir)), store_(store) {
  reader_ = std::thread([this] { ReadLoop(); });
}

ProfilerReportHandler::~ProfilerReportHandler() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    work_cv_.Signal();
  }
  reader_.join();
}

void ProfilerReportHandler::ReadLoop() {
  while (true) {
    absl::AnyInvocable<void() &&> read;
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_ && reads_.empty()) work_cv_.Wait(&mu_);
      if (reads_.empty()) return;  // Stopping, and every read asked for is done.
      read = std::move(reads_.front());
      reads_.pop_front();
    }
    std::move(read)();
  }
}

void ProfilerReportHandler::GetProfilerReport(const v1::GetProfilerReportRequest& request,
                                              v1::GetProfilerReportResponse* response,
                                              DoneCallback done) {
  if (absl::Status valid = ValidateTrainingJobName(request.training_job_name()); !valid.ok()) {
    std::move(done)(valid);
    return;
  }
  if (!v1::ProfilerReportFormat::Value_IsValid(request.format())) {
    std::move(done)(InvalidField(
        "Format", absl::StrCat(request.format(), " is not a report format; use HTML or JSON")));
    return;
  }
  // Replicas: a job written through another replica a moment ago is known
  // here once the change feed is read.
  manager_->AwaitConsistentRead(
      [this, &request, response, done = std::move(done)](absl::Status caught_up) mutable {
        if (!caught_up.ok()) {
          std::move(done)(caught_up);
          return;
        }
        ServeCaughtUp(request, response, std::move(done));
      });
}

void ProfilerReportHandler::ServeCaughtUp(const v1::GetProfilerReportRequest& request,
                                          v1::GetProfilerReportResponse* response,
                                          DoneCallback done) {
  std::shared_ptr<const JobRecord> job = manager_->GetJob(request.training_job_name());
  if (job == nullptr) {
    std::move(done)(absl::NotFoundError(
        absl::StrCat("training job '", request.training_job_name(), "' does not exist")));
    return;
  }
  absl::StatusOr<ReportRule> found = FindReportRule(*job, request);
  if (!found.ok()) {
    std::move(done)(found.status());
    return;
  }
  const std::string& rule = found->name;
  const RuleStatus status = found->status;
  const bool json = request.format() == v1::ProfilerReportFormat::JSON;
  const ProfilerReportFiles files =
      ProfilerReportFilesFor(report_dir_, job->training_job_name(), rule, found->stem);
  response->set_training_job_name(job->training_job_name());
  response->set_rule_configuration_name(rule);
  response->set_format(json ? v1::ProfilerReportFormat::JSON : v1::ProfilerReportFormat::HTML);
  response->set_path((json ? files.json : files.html).string());
  response->set_rule_evaluation_status(status);
  // No later version follows once training is over and the rule concluded;
  // a CreateXgboostReport report is final as soon as its rule concluded
  // (ProfilerReport's is written once more with the job's final status).
  const bool xgboost = found->stem == "xgboost_report";
  response->set_final((xgboost || IsTerminal(job->training_job_status())) && IsTerminal(status));

  absl::MutexLock lock(&mu_);
  if (stopping_) {
    std::move(done)(absl::UnavailableError("the server is shutting down"));
    return;
  }
  reads_.push_back(
      [this, response, path_only = request.path_only(), job_name = job->training_job_name(),
       job_created = ToAbslTime(job->creation_time()), rule, done = std::move(done)]() mutable {
        std::move(done)(ReadReport(job_name, job_created, rule, path_only, response));
      });
  work_cv_.Signal();
}

void ProfilerReportHandler::ForgetJob(const std::string& job_name, absl::Time deleted_at) {
  if (store_ == nullptr) return;
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  reads_.push_back([this, job_name, deleted_at]() {
    absl::Status deleted = store_->DeleteJob(job_name, absl::ToUnixMicros(deleted_at));
    if (!deleted.ok()) {
      spdlog::warn("deleting the profiling reports of deleted job '{}' failed: {}", job_name,
                   deleted.ToString());
    }
  });
  work_cv_.Signal();
}

absl::Status ProfilerReportHandler::ReadReport(const std::string& job_name, absl::Time job_created,
                                               const std::string& rule, bool path_only,
                                               v1::GetProfilerReportResponse* response) const {
  if (store_ != nullptr) return ReadFromStore(job_name, job_created, rule, path_only, response);
  const std::filesystem::path path = response->path();
  std::error_code error;
  const auto modified = std::filesystem::last_write_time(path, error);
  if (error) {
    return absl::NotFoundError(absl::StrCat(
        "no report yet for rule '", rule, "' of training job '", job_name, "' (", path.string(),
        ": ", error.message(), "); it is written after the rule's first evaluation pass"));
  }
  // file_time_type's clock has no portable epoch: shift by the clocks' offset now.
  const auto modified_system = std::chrono::system_clock::now() +
                               std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                   modified - std::filesystem::file_time_type::clock::now());
  SetTimestamp(absl::FromChrono(modified_system), response->mutable_last_modified_time());
  if (path_only) return absl::OkStatus();
  std::ifstream in(path, std::ios::binary);
  std::ostringstream content;
  content << in.rdbuf();
  if (!in || !content) {
    return absl::InternalError(
        absl::StrCat("cannot read the report ", path.string(), ": ", std::strerror(errno)));
  }
  response->set_content(std::move(content).str());
  return absl::OkStatus();
}

absl::Status ProfilerReportHandler::ReadFromStore(const std::string& job_name,
                                                  absl::Time job_created, const std::string& rule,
                                                  bool path_only,
                                                  v1::GetProfilerReportResponse* response) const {
  absl::StatusOr<std::optional<persistence::StoredReport>> stored = store_->Read(job_name, rule);
  if (!stored.ok()) return stored.status();
  // A report older than the job is an earlier job's of the same name.
  if (!stored->has_value() || absl::FromUnixMicros((*stored)->generated_at_us) < job_created) {
    return absl::NotFoundError(absl::StrCat("no report yet for rule '", rule, "' of training job '",
                                            job_name,
                                            "'; it is written after the rule's first "
                                            "evaluation pass"));
  }
  persistence::StoredReport& report = **stored;
  const bool json = response->format() == v1::ProfilerReportFormat::JSON;
  std::string& content = json ? report.json : report.html;
  // This server's copy at `path`, for readers on this machine (path_only);
  // rewritten when the database holds a newer report than the copy.
  const std::filesystem::path path = response->path();
  const auto generated = std::filesystem::file_time_type::clock::now() +
                         std::chrono::duration_cast<std::filesystem::file_time_type::duration>(
                             absl::ToChronoTime(absl::FromUnixMicros(report.generated_at_us)) -
                             std::chrono::system_clock::now());
  std::error_code error;
  const auto copied = std::filesystem::last_write_time(path, error);
  if (error || copied < generated - std::chrono::seconds(1) ||
      std::filesystem::file_size(path, error) != content.size()) {
    if (absl::Status written = base::WriteFileAtomically(path, content); !written.ok()) return written;
    std::filesystem::last_write_time(path, generated, error);  // Best effort.
  }
  SetTimestamp(absl::FromUnixMicros(report.generated_at_us),
               response->mutable_last_modified_time());
  if (!path_only) response->set_content(std::move(content));
  return absl::OkStatus();
}

}  // namespace debugplane::core
