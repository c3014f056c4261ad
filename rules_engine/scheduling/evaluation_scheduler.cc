#include "rules_engine/scheduling/evaluation_scheduler.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/output_path.h"
#include "core/profiler_report_files.h"
#include "core/rule_catalog.h"
#include "objectstore/message_text.h"
#include "rules_engine/catalog/builtin_rules.h"
#include "rules_engine/profiler/framework_timeline_reader.h"
#include "rules_engine/profiler/system_metrics_reader.h"
#include "rules_engine/profiler_rules/profiler_report_rules.h"
#include "rules_engine/report/profiler_report.h"
#include "rules_engine/rule/rule.h"
#include "rules_engine/scheduling/custom_evaluator.h"
#include "rules_engine/smdebug/trial_reader.h"
#include "spdlog/spdlog.h"

namespace debugplane::rules_engine {
namespace {

using core::JobRecord;

constexpr size_t kMaxDetails = 1024;

// Describes what the reader found, for a rule that saw no usable data.
std::string DescribeTrial(const TrialSummary& summary) {
  if (!summary.exists) {
    return absl::StrCat("the directory ", summary.path,
                        " does not exist: the training script saved nothing there (is the smdebug "
                        "hook registered and its LocalPath/S3OutputPath this one?)");
  }
  if (summary.steps_seen == 0) {
    return absl::StrCat(summary.path, " has no complete step",
                        summary.has_collections ? "" : " and no collections file");
  }
  const size_t shown = std::min<size_t>(summary.tensor_names_seen.size(), 12);
  // Tensor names are data from the trial's files: escaped, at most 40
  // characters each.
  return absl::StrCat(summary.path, " has ", summary.steps_seen, " steps (last global step ",
                      summary.last_global_step, ") with tensors [",
                      absl::StrJoin(summary.tensor_names_seen.begin(),
                                    summary.tensor_names_seen.begin() + shown, ", ",
                                    [](std::string* out, const std::string& name) {
                                      out->append(objectstore::EscapeForMessage(name, 40));
                                    }),
                      summary.tensor_names_seen.size() > shown ? ", ..." : "", "]");
}

std::string Truncate(std::string text) {
  if (text.size() > kMaxDetails) {
    text.resize(kMaxDetails - 3);
    text += "...";
  }
  return text;
}

// The terminal status a rule's verdict records.
v1::RuleEvaluationStatus::Value StatusOf(RuleVerdict::Kind kind) {
  switch (kind) {
    case RuleVerdict::Kind::kIssuesFound:
      return v1::RuleEvaluationStatus::IssuesFound;
    case RuleVerdict::Kind::kNoIssuesFound:
      return v1::RuleEvaluationStatus::NoIssuesFound;
    default:
      return v1::RuleEvaluationStatus::Error;
  }
}

bool JobIsStopping(const JobRecord& job) {
  return job.training_job_status() == v1::TrainingJobStatus::Stopping ||
         job.training_job_status() == v1::TrainingJobStatus::Stopped;
}

// The job says training has ended: the agent reported the command's exit
// (Completed, Failed) or the job was stopped (Stopped, once the process is
// gone). Every training process has exited: no file will be written any more.
bool JobSaysTrainingEnded(const JobRecord& job) {
  return core::IsTerminal(job.training_job_status());
}

// Whether training has ended: the one notion on which debugging rules and
// profiler rules conclude. The job says so, or the tensor trial ended and
// was read to its end (TrialReader::finished: with one worker its
// training_job_end.ts; with several, every worker writes that same file when
// it exits, so only the job's status tells that all of them did).
// REQUIRES: `reader` (if any) was told of the job's end (SetTrainingEnded)
// before its last read, as Evaluate does.
bool TrainingHasEnded(const JobRecord& job, const TrialReader* reader) {
  return JobSaysTrainingEnded(job) || (reader != nullptr && reader->finished());
}

std::string RuleToInvoke(const google::protobuf::Map<std::string, std::string>& parameters) {
  const auto it = parameters.find("rule_to_invoke");
  return it == parameters.end() ? "" : it->second;
}

// The newest subdirectory of `dir` by name (hour directories, YYYYMMDDHH),
// if it has one (and can be listed).
std::optional<objectstore::StoreLocation> NewestSubdirectory(
    const objectstore::StoreLocation& dir) {
  absl::StatusOr<objectstore::ListResult> listed =
      dir.store->ListAll({.prefix = dir.DirectoryPrefix(), .delimiter = "/"});
  if (!listed.ok() || listed->common_prefixes.empty()) return std::nullopt;
  const std::string& newest = listed->common_prefixes.back();  // Sorted.
  return objectstore::StoreLocation{dir.store, newest.substr(0, newest.size() - 1)};
}

// The parent "directory" of `location` in its store; nullopt for the
// store's root.
std::optional<objectstore::StoreLocation> Parent(const objectstore::StoreLocation& location) {
  if (location.prefix.empty()) return std::nullopt;
  const size_t slash = location.prefix.rfind('/');
  return objectstore::StoreLocation{
      location.store, slash == std::string::npos ? "" : location.prefix.substr(0, slash)};
}

// The one place the scheduler turns a job's output path into where it reads
// it. `field` names the path in errors ("DebugHookConfig.S3OutputPath");
// `remedy` says what to do instead of object storage.
absl::StatusOr<objectstore::StoreLocation> ResolveForReading(const core::DataRootStores& stores,
                                                             const std::string& uri,
                                                             absl::string_view field,
                                                             absl::string_view remedy) {
  absl::StatusOr<objectstore::StoreLocation> location = stores.Resolve(uri);
  if (location.ok()) return location;
  if (absl::IsUnimplemented(location.status())) {
    return absl::UnimplementedError(
        absl::StrCat(field, " ", location.status().message(), "; ", remedy));
  }
  return absl::Status(location.status().code(),
                      absl::StrCat(field, " cannot be read: ", location.status().message()));
}

// Writes `content` to `path` through a temporary file and a rename, so a
// reader sees the old report or the new one, never half of one.
absl::Status WriteFileAtomically(const std::filesystem::path& path, const std::string& content) {
  std::error_code error;
  std::filesystem::create_directories(path.parent_path(), error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create ", path.parent_path().string(), ": ", error.message()));
  }
  // A temporary of its own per write: two writers never rename each other's.
  static std::atomic<uint64_t> writes{0};
  const std::filesystem::path temporary =
      absl::StrCat(path.string(), ".tmp.", getpid(), ".", writes.fetch_add(1));
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.close();
    if (!out) {
      return absl::InternalError(
          absl::StrCat("cannot write ", temporary.string(), ": ", std::strerror(errno)));
    }
  }
  std::filesystem::rename(temporary, path, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot rename ", temporary.string(), " to ",
                                            path.string(), ": ", error.message()));
  }
  return absl::OkStatus();
}

}  // namespace

struct EvaluationScheduler::JobEvaluation {
  struct RuleRun {
    std::string configuration_name;
    std::unique_ptr<Rule> rule;
    bool done = false;
    int64_t last_step = -1;      // The last global step the rule evaluated.
    int64_t recorded_step = -1;  // The last one recorded durably (or asked to be).
  };

  // One ProfilerRuleConfiguration: its one rule, or every rule for
  // ProfilerReport.
  struct ProfilerRun {
    std::string configuration_name;
    // What the rules were made from, to make them again for a replay.
    std::string rule_to_invoke;
    RuleParameters parameters;
    std::vector<std::unique_ptr<ProfilerRule>> rules;
    bool report = false;         // ProfilerReport: also writes the report.
    bool status_done = false;    // Its terminal status is recorded (or was durable).
    bool final_written = false;  // The report after training ended is written.
    // The job status the final report was last written with.
    v1::TrainingJobStatus::Value final_job_status =
        v1::TrainingJobStatus::TRAINING_JOB_STATUS_UNSPECIFIED;
    absl::Time report_written = absl::InfinitePast();
    bool report_stale = true;  // Data or findings changed since it was written.
    bool active() const { return !status_done || (report && !final_written); }
  };

  std::string job_name;
  int64_t record_time_us = -1;
  // Why the trial cannot be read at all (reported as every rule's Error).
  std::string trial_problem;
  std::optional<objectstore::StoreLocation> trial;
  std::unique_ptr<TrialReader> reader;
  std::vector<RuleRun> rules;
  // Profiler rules: readers of ProfilerConfig.S3OutputPath (or why it cannot
  // be read), the runs, and the data a report draws.
  std::optional<objectstore::StoreLocation> profiler;
  std::string profiler_problem;
  std::unique_ptr<SystemMetricsReader> system_reader;
  std::unique_ptr<FrameworkTimelineReader> framework_reader;
  std::unique_ptr<ProfilerReportData> report_data;
  std::vector<ProfilerRun> profiler_runs;
  std::atomic<bool> cancelled{false};
  // When progress was last recorded: recording at most once per
  // progress_interval keeps a fast writer from costing a write per step.
  absl::Time progress_recorded = absl::InfinitePast();
  // Whether some active rule wants a tensor, by name: rules match names with
  // regexes, so decide once per name, again when rules finish or the
  // trial's collections change.
  std::unordered_map<std::string, bool> wanted;
  std::pair<size_t, size_t> wanted_key{SIZE_MAX, SIZE_MAX};  // (active rules, collections)
  // Guarded by the scheduler's mu_.
  std::shared_ptr<const JobRecord> latest_job;     // The newest record seen.
  std::vector<ProfilerRun> pending_profiler_runs;  // Added by updates; moved in by Evaluate.
  std::set<std::string> profiler_run_names;        // Every run added, pending or not.
  bool has_report = false;                         // One of them is a ProfilerReport.
  // Only final reports are owed (the job was stopped, or its rules concluded
  // before the job reached its final status): passes only (re)write them,
  // with the job's status, until it is final (see FinalReportsSettled).
  // Such an evaluation is in finishing_, no longer in jobs_.
  bool finishing = false;
  // The job's end (JobSaysTrainingEnded) was seen by Apply: a pass is owed.
  bool job_end_seen = false;
  bool queued = false;
  bool running = false;
  bool rerun = false;
  std::vector<objectstore::ChangeNotifier::WatchId> watches;
};

EvaluationScheduler::EvaluationScheduler(core::TrainingJobManager* manager,
                                         EvaluationSchedulerOptions options)
    : manager_(manager), options_(std::move(options)) {}

EvaluationScheduler::~EvaluationScheduler() { Shutdown(); }

absl::StatusOr<objectstore::StoreLocation> EvaluationScheduler::ResolveOtherTrial(
    const std::string& other_trial) const {
  // A training job's name: its tensor output. Otherwise a trial path or URI,
  // confined to the data roots like any output path.
  std::string location = other_trial;
  if (auto job = manager_->GetJob(other_trial); job != nullptr) {
    if (!job->has_debug_hook_config()) {
      return absl::FailedPreconditionError(absl::StrCat("other_trials: training job '", other_trial,
                                                        "' has no DebugHookConfig, so no tensors"));
    }
    location = job->debug_hook_config().s3_output_path();
  }
  absl::StatusOr<objectstore::StoreLocation> resolved = stores_.Resolve(location);
  if (absl::IsUnimplemented(resolved.status())) {
    return absl::UnimplementedError(
        absl::StrCat("other_trials '", other_trial, "': ", resolved.status().message()));
  }
  if (!resolved.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "other_trials '", other_trial,
        "' is neither a training job nor a readable trial path: ", resolved.status().message()));
  }
  return resolved;
}

void EvaluationScheduler::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (started_) return;
    started_ = true;
  }
  notifier_ = std::make_unique<objectstore::ChangeNotifier>(
      [this](objectstore::ChangeNotifier::WatchId id) { OnChange(id); },
      objectstore::ChangeNotifier::Options{.poll_interval = options_.poll_interval});
  custom_runner_ = std::make_unique<CustomEvaluatorRunner>(
      CustomEvaluatorRunner::Options{.max_concurrent = options_.custom_evaluator_concurrency});
  for (int i = 0; i < std::max(1, options_.worker_threads); ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
  poller_ = std::thread([this] { PollLoop(); });

  core::TrainingJobManager::Observation observation = manager_->AddCommitObserver(
      [this](const std::string& name, std::shared_ptr<const JobRecord> job) {
        OnCommit(name, std::move(job));
      });
  observer_id_ = observation.id;
  absl::MutexLock lock(&mu_);
  for (auto& job : observation.jobs) Apply(job->training_job_name(), job);
}

void EvaluationScheduler::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ || !started_) {
      stopping_ = true;
      return;
    }
    stopping_ = true;
    for (auto& [name, evaluation] : jobs_) evaluation->cancelled = true;
    work_cv_.SignalAll();
    stop_cv_.SignalAll();
  }
  manager_->RemoveCommitObserver(observer_id_);
  // Evaluators still running are stopped; their rules stay InProgress and
  // run again at the next start.
  custom_runner_->Shutdown();
  for (auto& worker : workers_) worker.join();
  // Statuses still refused by the storage are dropped: those rules stay
  // InProgress and are evaluated again at the next start.
  status_recorder_.Shutdown();
  if (poller_.joinable()) poller_.join();
  // Its threads stop here; OnChange sees stopping_ meanwhile.
  notifier_.reset();
}

size_t EvaluationScheduler::active_jobs() const {
  absl::MutexLock lock(&mu_);
  return jobs_.size();
}

void EvaluationScheduler::OnCommit(const std::string& job_name,
                                   std::shared_ptr<const JobRecord> job) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  Apply(job_name, std::move(job));
}

void EvaluationScheduler::Apply(const std::string& job_name, std::shared_ptr<const JobRecord> job) {
  FollowFinishingLocked(job_name, job);
  const int64_t version = job == nullptr ? -1 : core::ToUnixMicros(job->last_modified_time());
  auto it = jobs_.find(job_name);
  if (job == nullptr || JobIsStopping(*job)) {
    // Deleted or stopped: the manager settles the rule statuses itself.
    if (auto runs = custom_runs_.find(job_name); runs != custom_runs_.end()) {
      for (const auto& [rule, id] : runs->second) {
        if (id != 0) custom_runner_->Cancel(id);
      }
      if (job == nullptr) custom_runs_.erase(runs);
    }
    if (it != jobs_.end()) {
      std::shared_ptr<JobEvaluation> evaluation = it->second;
      DropWatchesLocked(*evaluation);
      jobs_.erase(it);
      if (job != nullptr && evaluation->has_report && !options_.report_dir.empty()) {
        // Stopped: a last pass writes its reports, final, with the job's
        // status, and again once the job is Stopped (the stop takes until
        // the training process has exited).
        evaluation->latest_job = std::move(job);
        evaluation->record_time_us = version;
        StartFinishingLocked(evaluation);
        EnqueueLocked(evaluation);
      } else {
        evaluation->cancelled = true;
      }
    }
    return;
  }
  if (it != jobs_.end()) {
    // Snapshots and notifications may arrive out of order; keep the newest.
    JobEvaluation& existing = *it->second;
    if (version >= existing.record_time_us) {
      existing.record_time_us = version;
      existing.latest_job = job;
      // Profiler rules added by UpdateTrainingJob start now; training that
      // ended lets the rules conclude after a last read. (Other commits, e.g.
      // the statuses this scheduler records, need no pass.)
      const bool added = AddProfilerRunsLocked(existing, *job, /*pending=*/true);
      const bool ended = JobSaysTrainingEnded(*job) && !existing.job_end_seen;
      existing.job_end_seen = existing.job_end_seen || ended;
      if (added || ended) EnqueueLocked(it->second);
    }
    return;
  }

  auto evaluation = std::make_shared<JobEvaluation>();
  evaluation->job_name = job_name;
  evaluation->record_time_us = version;
  evaluation->latest_job = job;
  std::vector<std::pair<std::string, std::string>> errors;
  std::vector<const v1::DebugRuleConfiguration*> custom;
  for (int i = 0; i < job->debug_rule_configurations_size(); ++i) {
    const v1::DebugRuleConfiguration& config = job->debug_rule_configurations(i);
    if (i >= job->debug_rule_evaluation_statuses_size() ||
        job->debug_rule_evaluation_statuses(i).rule_evaluation_status() !=
            v1::RuleEvaluationStatus::InProgress) {
      continue;
    }
    if (!core::IsBuiltinRuleEvaluatorImage(config.rule_evaluator_image())) {
      custom.push_back(&config);
      continue;
    }
    RuleParameters parameters(config.rule_parameters().begin(), config.rule_parameters().end());
    const auto rule_to_invoke = config.rule_parameters().find("rule_to_invoke");
    absl::StatusOr<std::unique_ptr<Rule>> rule = CreateBuiltinRule(
        rule_to_invoke == config.rule_parameters().end() ? "" : rule_to_invoke->second, parameters,
        RuleContext{.now = [] { return absl::Now(); }, .other_trial = other_trial_lookup_});
    if (!rule.ok()) {
      errors.emplace_back(config.rule_configuration_name(), std::string(rule.status().message()));
      continue;
    }
    evaluation->rules.push_back({config.rule_configuration_name(), *std::move(rule), false});
  }
  for (auto& [rule_name, message] : errors) {
    RecordStatus(job_name, rule_name, v1::RuleEvaluationStatus::Error, std::move(message));
  }
  if (!custom.empty()) StartCustomLocked(*job, custom);
  AddProfilerRunsLocked(*evaluation, *job, /*pending=*/false);
  if (finishing_.count(job_name) > 0) {
    // A concluded evaluation of this job still owes its final reports (it
    // rewrites them with the job's final status): a report-only run here
    // would write the same files at the same time, with a non-final report.
    auto& runs = evaluation->profiler_runs;
    runs.erase(
        std::remove_if(runs.begin(), runs.end(),
                       [](const JobEvaluation::ProfilerRun& run) { return run.status_done; }),
        runs.end());
  }
  if (evaluation->rules.empty() && evaluation->profiler_runs.empty()) return;

  if (evaluation->rules.empty()) {
    // Profiler rules only: no tensor trial to read.
  } else if (!job->has_debug_hook_config()) {
    evaluation->trial_problem =
        "the job has no DebugHookConfig, so the training script saves no tensors; add one with "
        "S3OutputPath and the collections the rule needs";
  } else {
    absl::StatusOr<objectstore::StoreLocation> location = ResolveForReading(
        stores_, job->debug_hook_config().s3_output_path(), "DebugHookConfig.S3OutputPath",
        "save tensors to a local path (or file:// URI) under the server's --data-root");
    if (!location.ok()) {
      evaluation->trial_problem = std::string(location.status().message());
    } else {
      evaluation->trial = *location;
      evaluation->reader = std::make_unique<TrialReader>(*std::move(location));
    }
  }
  jobs_[job_name] = evaluation;
  EnqueueLocked(evaluation);
}

void EvaluationScheduler::StartFinishingLocked(const std::shared_ptr<JobEvaluation>& evaluation) {
  evaluation->finishing = true;
  finishing_[evaluation->job_name].push_back(evaluation);
}

void EvaluationScheduler::FollowFinishingLocked(const std::string& job_name,
                                                const std::shared_ptr<const JobRecord>& job) {
  auto found = finishing_.find(job_name);
  if (found == finishing_.end()) return;
  if (job == nullptr) {  // Deleted: its reports are of no use any more.
    for (const auto& evaluation : found->second) evaluation->cancelled = true;
    finishing_.erase(found);
    return;
  }
  const int64_t version = core::ToUnixMicros(job->last_modified_time());
  for (const auto& evaluation : found->second) {
    if (version < evaluation->record_time_us) continue;  // An older snapshot.
    evaluation->record_time_us = version;
    evaluation->latest_job = job;
    if (core::IsTerminal(job->training_job_status())) EnqueueLocked(evaluation);
  }
}

void EvaluationScheduler::StopFinishingLocked(const std::shared_ptr<JobEvaluation>& evaluation) {
  auto found = finishing_.find(evaluation->job_name);
  if (found == finishing_.end()) return;
  auto& list = found->second;
  list.erase(std::remove(list.begin(), list.end(), evaluation), list.end());
  if (list.empty()) finishing_.erase(found);
}

bool EvaluationScheduler::FinalReportsSettled(const JobEvaluation& evaluation,
                                              const JobRecord& job) const {
  if (options_.report_dir.empty()) return true;
  const bool terminal = core::IsTerminal(job.training_job_status());
  for (const auto& run : evaluation.profiler_runs) {
    if (!run.report) continue;
    if (!run.final_written || !terminal || run.final_job_status != job.training_job_status()) {
      return false;
    }
  }
  return true;
}

bool EvaluationScheduler::AddProfilerRunsLocked(JobEvaluation& evaluation, const JobRecord& job,
                                                const bool pending) {
  const std::string& job_name = job.training_job_name();
  std::vector<JobEvaluation::ProfilerRun> runs;
  for (int i = 0; i < job.profiler_rule_configurations_size(); ++i) {
    const v1::ProfilerRuleConfiguration& config = job.profiler_rule_configurations(i);
    const std::string& name = config.rule_configuration_name();
    if (evaluation.profiler_run_names.count(name) > 0) continue;
    const bool in_progress = i < job.profiler_rule_evaluation_statuses_size() &&
                             job.profiler_rule_evaluation_statuses(i).rule_evaluation_status() ==
                                 v1::RuleEvaluationStatus::InProgress;
    const std::string rule_to_invoke = RuleToInvoke(config.rule_parameters());
    // A ProfilerReport that already reported IssuesFound (before a restart)
    // still owes its report updates until training ends.
    const bool live_report = rule_to_invoke == kProfilerReportRule && !JobSaysTrainingEnded(job) &&
                             i < job.profiler_rule_evaluation_statuses_size() &&
                             job.profiler_rule_evaluation_statuses(i).rule_evaluation_status() ==
                                 v1::RuleEvaluationStatus::IssuesFound;
    if (!in_progress && !live_report) continue;
    evaluation.profiler_run_names.insert(name);
    if (!core::IsBuiltinRuleEvaluatorImage(config.rule_evaluator_image())) {
      RecordStatus(job_name, name, v1::RuleEvaluationStatus::Error,
                   absl::StrCat("profiler rule evaluator '", config.rule_evaluator_image(),
                                "' is not built in; custom evaluators run debugging rules only "
                                "(DebugRuleConfigurations)"));
      continue;
    }
    RuleParameters parameters(config.rule_parameters().begin(), config.rule_parameters().end());
    absl::StatusOr<std::vector<std::unique_ptr<ProfilerRule>>> rules =
        CreateProfilerRuleSet(rule_to_invoke, parameters);
    if (!rules.ok()) {
      RecordStatus(job_name, name, v1::RuleEvaluationStatus::Error,
                   std::string(rules.status().message()));
      continue;
    }
    JobEvaluation::ProfilerRun run;
    run.configuration_name = name;
    run.rule_to_invoke = rule_to_invoke;
    run.parameters = std::move(parameters);
    run.rules = *std::move(rules);
    run.report = rule_to_invoke == kProfilerReportRule;
    evaluation.has_report = evaluation.has_report || run.report;
    run.status_done = !in_progress;
    runs.push_back(std::move(run));
  }
  if (runs.empty()) return false;
  if (!evaluation.profiler.has_value() && evaluation.profiler_problem.empty()) {
    absl::StatusOr<objectstore::StoreLocation> location = ResolveForReading(
        stores_, job.profiler_config().s3_output_path(), "ProfilerConfig.S3OutputPath",
        "profile to a local path (or file:// URI) under the server's --data-root");
    if (!location.ok()) {
      evaluation.profiler_problem = std::string(location.status().message());
    } else {
      evaluation.profiler = *std::move(location);
    }
  }
  auto& target = pending ? evaluation.pending_profiler_runs : evaluation.profiler_runs;
  for (auto& run : runs) target.push_back(std::move(run));
  return true;
}

void EvaluationScheduler::StartCustomLocked(
    const JobRecord& job, const std::vector<const v1::DebugRuleConfiguration*>& configs) {
  const std::string& job_name = job.training_job_name();
  // Where the evaluator finds the tensors: the local trial directory, or the
  // output URI as given when it is in object storage (the evaluator may read
  // it itself).
  std::string trial;
  if (job.has_debug_hook_config()) {
    absl::StatusOr<core::OutputLocation> location =
        core::ResolveOutputPath(job.debug_hook_config().s3_output_path(), options_.data_roots);
    trial = location.ok() ? location->location : job.debug_hook_config().s3_output_path();
  }
  auto& runs = custom_runs_[job_name];
  for (const v1::DebugRuleConfiguration* config : configs) {
    const std::string& rule = config->rule_configuration_name();
    // Once per process: a later commit of the job that still shows the rule
    // InProgress (its verdict not yet durable) must not start it again.
    if (runs.count(rule) > 0) continue;
    auto command = options_.custom_evaluators.find(config->rule_evaluator_image());
    if (command == options_.custom_evaluators.end() || command->second.empty()) {
      RecordStatus(job_name, rule, v1::RuleEvaluationStatus::Error,
                   absl::StrCat("custom rule evaluator '", config->rule_evaluator_image(),
                                "' is not configured on this server (--allow-evaluator)"));
      continue;
    }
    CustomEvaluation evaluation;
    evaluation.argv = command->second;
    evaluation.environment = CustomEvaluatorEnvironment(
        job_name, rule, trial,
        RuleParameters(config->rule_parameters().begin(), config->rule_parameters().end()));
    evaluation.time_limit = options_.custom_evaluator_time_limit;
    evaluation.description = absl::StrCat("rule '", rule, "' of job '", job_name, "'");
    runs[rule] = custom_runner_->Start(std::move(evaluation),
                                       [this, job_name, rule](CustomEvaluationResult result) {
                                         {
                                           absl::MutexLock lock(&mu_);
                                           auto job_runs = custom_runs_.find(job_name);
                                           if (job_runs != custom_runs_.end()) {
                                             auto run = job_runs->second.find(rule);
                                             if (run != job_runs->second.end()) {
                                               run->second = 0;  // Finished.
                                             }
                                           }
                                         }
                                         // Stopped (the manager records Stopped) or shutting down
                                         // (the rule stays InProgress and runs again after the
                                         // restart).
                                         if (result.cancelled) return;
                                         RecordStatus(job_name, rule, StatusOf(result.verdict.kind),
                                                      std::move(result.verdict.details));
                                       });
  }
}

void EvaluationScheduler::RecordStatus(const std::string& job, const std::string& rule, int status,
                                       std::string details, int64_t last_evaluated_step) {
  status_recorder_.Record(job, rule, last_evaluated_step, static_cast<core::RuleStatus>(status),
                          Truncate(std::move(details)));
}

void EvaluationScheduler::EnqueueLocked(const std::shared_ptr<JobEvaluation>& evaluation) {
  if (evaluation->running) {
    evaluation->rerun = true;
    return;
  }
  if (evaluation->queued) return;
  evaluation->queued = true;
  ready_.push_back(evaluation);
  work_cv_.Signal();
}

void EvaluationScheduler::WorkerLoop() {
  while (true) {
    std::shared_ptr<JobEvaluation> evaluation;
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_ && ready_.empty()) work_cv_.Wait(&mu_);
      if (stopping_) return;
      evaluation = std::move(ready_.front());
      ready_.pop_front();
      evaluation->queued = false;
      evaluation->running = true;
    }
    Evaluate(*evaluation);
    absl::MutexLock lock(&mu_);
    evaluation->running = false;
    if (evaluation->finishing) {
      // Owes its final reports until they show the job's final status
      // (Apply enqueues it when that status is committed).
      if (evaluation->cancelled || FinalReportsSettled(*evaluation, *evaluation->latest_job)) {
        StopFinishingLocked(evaluation);
      } else if (evaluation->rerun) {
        evaluation->rerun = false;
        EnqueueLocked(evaluation);
      }
      continue;
    }
    bool active = !evaluation->pending_profiler_runs.empty();
    for (const auto& run : evaluation->rules) active = active || !run.done;
    for (const auto& run : evaluation->profiler_runs) active = active || run.active();
    if (!active || evaluation->cancelled) {
      auto it = jobs_.find(evaluation->job_name);
      if (it != jobs_.end() && it->second == evaluation) {
        DropWatchesLocked(*evaluation);
        jobs_.erase(it);
        // Concluded before the job's final status was known (e.g. on
        // training_job_end.ts): the reports are written again with it.
        if (!evaluation->cancelled && !FinalReportsSettled(*evaluation, *evaluation->latest_job)) {
          evaluation->rerun = false;
          StartFinishingLocked(evaluation);
          if (core::IsTerminal(evaluation->latest_job->training_job_status())) {
            EnqueueLocked(evaluation);
          }
        }
      }
      continue;
    }
    // A watch added now misses what landed since this evaluation listed the
    // trial: evaluate once more.
    if (EnsureWatchesLocked(*evaluation)) evaluation->rerun = true;
    if (evaluation->rerun) {
      evaluation->rerun = false;
      EnqueueLocked(evaluation);
    }
  }
}

void EvaluationScheduler::Report(JobEvaluation& evaluation, size_t rule_index, int status,
                                 std::string details) {
  auto& run = evaluation.rules[rule_index];
  run.done = true;
  // The step the verdict was reached at is recorded with it (progress of a
  // terminal rule is left as it is, so it goes first). Durable ahead of the
  // verdict at worst, which is safe: a rule still InProgress after a restart
  // replays its steps from the start, so the verdict is reached again.
  int64_t last_step = -1;
  if (run.last_step > run.recorded_step) {
    last_step = run.last_step;
    run.recorded_step = run.last_step;
  }
  RecordStatus(evaluation.job_name, run.configuration_name, status, std::move(details), last_step);
}

void EvaluationScheduler::Evaluate(JobEvaluation& evaluation) {
  std::shared_ptr<const JobRecord> job;
  bool finishing = false;
  std::vector<JobEvaluation::ProfilerRun> added;
  {
    absl::MutexLock lock(&mu_);
    job = evaluation.latest_job;
    finishing = evaluation.finishing;
    added.swap(evaluation.pending_profiler_runs);
  }
  if (!added.empty()) {
    // Rules added by an update: if the readers are past data they have not
    // seen (nor a new report), every profiler rule replays it.
    const bool data_read =
        evaluation.system_reader != nullptr || evaluation.framework_reader != nullptr;
    for (auto& run : added) evaluation.profiler_runs.push_back(std::move(run));
    if (data_read) ReplayProfilerRules(evaluation);
  }
  if (finishing) {
    // No more evaluation (the rules concluded, or the job was stopped and
    // the manager settles their statuses): only the final reports, from the
    // data already read (what the rules' statuses say), with the job's
    // current status. The tensor trial is not read any more: its reader and
    // rules are let go (the job may stay InProgress for long).
    evaluation.reader.reset();
    evaluation.rules.clear();
    for (size_t i = 0; i < evaluation.profiler_runs.size(); ++i) {
      const JobEvaluation::ProfilerRun& run = evaluation.profiler_runs[i];
      if (run.report &&
          (!run.final_written || run.final_job_status != job->training_job_status())) {
        WriteReport(evaluation, i, *job, /*final=*/true);
      }
    }
    return;
  }
  // The job's end is told to the reader before it reads: its listings then
  // see every file training wrote (the last complete read).
  if (evaluation.reader != nullptr && JobSaysTrainingEnded(*job)) {
    evaluation.reader->SetTrainingEnded();
  }
  bool debug_active = false;
  for (const auto& run : evaluation.rules) debug_active = debug_active || !run.done;
  if (debug_active) EvaluateDebugRules(evaluation, *job);
  if (!evaluation.profiler_runs.empty() && !evaluation.cancelled) {
    EvaluateProfilerRules(evaluation, *job);
  }
}

void EvaluationScheduler::EvaluateDebugRules(JobEvaluation& evaluation, const JobRecord& job) {
  if (!evaluation.trial_problem.empty()) {
    for (size_t i = 0; i < evaluation.rules.size(); ++i) {
      if (!evaluation.rules[i].done) {
        Report(evaluation, i, v1::RuleEvaluationStatus::Error, evaluation.trial_problem);
      }
    }
    return;
  }
  auto wanted = [&evaluation](const std::string& tensor, const TrialInfo& info) {
    size_t active = 0;
    for (const auto& run : evaluation.rules) active += run.done ? 0 : 1;
    const std::pair<size_t, size_t> key{active, info.collections.size()};
    if (key != evaluation.wanted_key) {
      evaluation.wanted.clear();
      evaluation.wanted_key = key;
    }
    auto [it, inserted] = evaluation.wanted.try_emplace(tensor, false);
    if (inserted) {
      for (const auto& run : evaluation.rules) {
        if (!run.done && run.rule->Wants(tensor, info)) {
          it->second = true;
          break;
        }
      }
    }
    return it->second;
  };
  absl::StatusOr<std::vector<Step>> steps = evaluation.reader->ReadNewSteps(wanted);
  if (!steps.ok()) {
    for (size_t i = 0; i < evaluation.rules.size(); ++i) {
      if (!evaluation.rules[i].done) {
        Report(evaluation, i, v1::RuleEvaluationStatus::Error,
               absl::StrCat("cannot read the training data in ", evaluation.reader->summary().path,
                            ": ", steps.status().message()));
      }
    }
    return;
  }
  const TrialInfo& info = evaluation.reader->info();
  for (const Step& step : *steps) {
    if (evaluation.cancelled) return;
    for (size_t i = 0; i < evaluation.rules.size(); ++i) {
      auto& run = evaluation.rules[i];
      if (run.done) continue;
      run.last_step = step.global_step;
      RuleVerdict verdict = run.rule->OnStep(step, info);
      if (verdict.kind == RuleVerdict::Kind::kIssuesFound) {
        Report(evaluation, i, v1::RuleEvaluationStatus::IssuesFound, std::move(verdict.details));
      } else if (verdict.kind == RuleVerdict::Kind::kError) {
        Report(evaluation, i, v1::RuleEvaluationStatus::Error, std::move(verdict.details));
      }
    }
  }
  // Wall-clock rules (StalledTrainingRule): the poll pass brings every job
  // here at least once per poll interval, which bounds how late a tick is.
  const absl::Time now = absl::Now();
  for (size_t i = 0; i < evaluation.rules.size(); ++i) {
    auto& run = evaluation.rules[i];
    if (run.done) continue;
    const absl::optional<absl::Time> deadline = run.rule->NextDeadline();
    if (!deadline.has_value() || *deadline > now) continue;
    RuleVerdict verdict = run.rule->OnTick(now);
    if (verdict.kind == RuleVerdict::Kind::kIssuesFound) {
      Report(evaluation, i, v1::RuleEvaluationStatus::IssuesFound, std::move(verdict.details));
    } else if (verdict.kind == RuleVerdict::Kind::kError) {
      Report(evaluation, i, v1::RuleEvaluationStatus::Error, std::move(verdict.details));
    }
  }
  // Conclude only after the read that saw the end (finished: no step left).
  const bool ended =
      TrainingHasEnded(job, evaluation.reader.get()) && evaluation.reader->finished();
  RecordProgress(evaluation, /*force=*/ended);
  if (!ended || evaluation.cancelled) return;
  for (size_t i = 0; i < evaluation.rules.size(); ++i) {
    auto& run = evaluation.rules[i];
    if (run.done) continue;
    RuleVerdict verdict = run.rule->OnTrainingEnd(info);
    switch (verdict.kind) {
      case RuleVerdict::Kind::kIssuesFound:
        Report(evaluation, i, v1::RuleEvaluationStatus::IssuesFound, std::move(verdict.details));
        break;
      case RuleVerdict::Kind::kError:
        Report(
            evaluation, i, v1::RuleEvaluationStatus::Error,
            absl::StrCat(verdict.details, ". Read: ", DescribeTrial(evaluation.reader->summary())));
        break;
      default:
        Report(evaluation, i, v1::RuleEvaluationStatus::NoIssuesFound,
               verdict.details.empty()
                   ? absl::StrCat("evaluated ", evaluation.reader->summary().steps_seen,
                                  " steps; no issues found")
                   : std::move(verdict.details));
    }
  }
}

void EvaluationScheduler::ReplayProfilerRules(JobEvaluation& evaluation) {
  // Start over, as after a restart: fresh readers, fresh rules (they are
  // deterministic, so the ones already running reach the same state again),
  // the recorded statuses kept, so nothing is reported twice.
  evaluation.system_reader.reset();
  evaluation.framework_reader.reset();
  evaluation.report_data.reset();
  for (auto& run : evaluation.profiler_runs) {
    absl::StatusOr<std::vector<std::unique_ptr<ProfilerRule>>> rules =
        CreateProfilerRuleSet(run.rule_to_invoke, run.parameters);
    if (rules.ok()) run.rules = *std::move(rules);  // Made once already: cannot fail.
    run.report_stale = true;
  }
}

void EvaluationScheduler::EvaluateProfilerRules(JobEvaluation& evaluation, const JobRecord& job) {
  using ProfilerRun = JobEvaluation::ProfilerRun;
  auto report_status = [&](ProfilerRun& run, int status, std::string details) {
    run.status_done = true;
    run.report_stale = true;
    RecordStatus(evaluation.job_name, run.configuration_name, status, std::move(details));
  };
  if (!evaluation.profiler_problem.empty()) {
    for (ProfilerRun& run : evaluation.profiler_runs) {
      if (!run.status_done) {
        report_status(run, v1::RuleEvaluationStatus::Error, evaluation.profiler_problem);
      }
      run.final_written = true;  // Nothing to draw a report from.
    }
    return;
  }
  // The same notion as the debugging rules': rules conclude, and reports
  // are final, on the read made once training ended, so a status's details
  // and the final report come from the same complete read.
  const bool ended = TrainingHasEnded(job, evaluation.reader.get());

  // Read only what some active rule (or report) wants.
  bool want_system = false;
  bool want_framework = false;
  bool want_report = false;
  for (const ProfilerRun& run : evaluation.profiler_runs) {
    if (!run.active()) continue;
    want_report = want_report || run.report;
    for (const auto& rule : run.rules) {
      want_system = want_system || rule->WantsSystemMetrics();
      want_framework = want_framework || rule->WantsFrameworkEvents();
    }
  }
  if (want_report) {
    want_system = want_framework = true;
    if (evaluation.report_data == nullptr) {
      evaluation.report_data = std::make_unique<ProfilerReportData>();
    }
  }
  std::vector<SystemMetricPoint> points;
  std::vector<FrameworkEvent> events;
  if (want_system) {
    if (evaluation.system_reader == nullptr) {
      evaluation.system_reader = std::make_unique<SystemMetricsReader>(*evaluation.profiler);
    }
    points = evaluation.system_reader->ReadNew();
  }
  if (want_framework) {
    if (evaluation.framework_reader == nullptr) {
      evaluation.framework_reader = std::make_unique<FrameworkTimelineReader>(*evaluation.profiler);
    }
    events = evaluation.framework_reader->ReadNew();
  }
  const bool new_data = !points.empty() || !events.empty();
  if (want_report && new_data) {
    evaluation.report_data->AddMetrics(points);
    evaluation.report_data->AddFrameworkEvents(events);
  }
  if (evaluation.cancelled) return;

  const absl::Time now = absl::Now();
  for (ProfilerRun& run : evaluation.profiler_runs) {
    if (!run.active()) continue;
    if (new_data) run.report_stale = true;
    for (const auto& rule : run.rules) {
      RuleVerdict verdict;
      if (rule->WantsSystemMetrics() && !points.empty()) verdict = rule->OnMetrics(points);
      if (verdict.kind == RuleVerdict::Kind::kContinue && rule->WantsFrameworkEvents() &&
          !events.empty()) {
        verdict = rule->OnFrameworkEvents(events);
      }
      if (verdict.kind == RuleVerdict::Kind::kContinue) verdict = rule->OnTick(now);
      if (verdict.kind != RuleVerdict::Kind::kIssuesFound || run.status_done) continue;
      if (run.report) {
        const core::ProfilerReportFiles files = core::ProfilerReportFilesFor(
            options_.report_dir, evaluation.job_name, run.configuration_name);
        report_status(run, v1::RuleEvaluationStatus::IssuesFound,
                      absl::StrCat(rule->name(), ": ", verdict.details,
                                   options_.report_dir.empty()
                                       ? ""
                                       : absl::StrCat(" (report: ", files.html.string(), ")")));
      } else {
        report_status(run, v1::RuleEvaluationStatus::IssuesFound, std::move(verdict.details));
      }
    }
  }

  if (ended) {
    std::string read;  // What was read, for verdicts that saw too little.
    if (evaluation.system_reader != nullptr) read = evaluation.system_reader->Summary();
    if (evaluation.framework_reader != nullptr) {
      absl::StrAppend(&read, read.empty() ? "" : "; ", evaluation.framework_reader->Summary());
    }
    if (job.profiler_config().disable_profiler()) {
      absl::StrAppend(&read, "; profiling is disabled (ProfilerConfig.DisableProfiler)");
    }
    for (ProfilerRun& run : evaluation.profiler_runs) {
      if (!run.active()) continue;
      run.report_stale = true;
      std::vector<std::string> errors;
      for (const auto& rule : run.rules) {
        RuleVerdict verdict = rule->OnEnd();
        if (run.status_done) continue;
        if (!run.report) {
          if (verdict.kind == RuleVerdict::Kind::kError) {
            absl::StrAppend(&verdict.details, ". Read: ", read);
          }
          report_status(run, StatusOf(verdict.kind), std::move(verdict.details));
        } else if (verdict.kind == RuleVerdict::Kind::kIssuesFound) {
          report_status(run, v1::RuleEvaluationStatus::IssuesFound,
                        absl::StrCat(rule->name(), ": ", verdict.details));
        } else if (verdict.kind == RuleVerdict::Kind::kError) {
          errors.push_back(rule->name());
        }
      }
      if (run.status_done) continue;
      if (errors.size() == run.rules.size()) {
        report_status(run, v1::RuleEvaluationStatus::Error,
                      absl::StrCat("no profiling data to evaluate: ", read));
      } else {
        report_status(run, v1::RuleEvaluationStatus::NoIssuesFound,
                      absl::StrCat(run.rules.size(), " rules evaluated, no issues found",
                                   errors.empty() ? ""
                                                  : absl::StrCat(" (", absl::StrJoin(errors, ", "),
                                                                 " had no data to evaluate)"),
                                   ". Read: ", read));
      }
    }
  }

  for (size_t i = 0; i < evaluation.profiler_runs.size(); ++i) {
    ProfilerRun& run = evaluation.profiler_runs[i];
    if (!run.report || run.final_written || options_.report_dir.empty()) {
      if (ended) run.final_written = true;
      continue;
    }
    // Regenerated at most once per report_interval while data arrives, and
    // at once the first time and at the end.
    if (ended || (run.report_stale && now - run.report_written >= options_.report_interval)) {
      WriteReport(evaluation, i, job, ended);
      run.report_written = now;
      run.report_stale = false;
      if (ended) run.final_written = true;
    }
  }
}

void EvaluationScheduler::WriteReport(JobEvaluation& evaluation, size_t run_index,
                                      const JobRecord& job, bool final) {
  JobEvaluation::ProfilerRun& run = evaluation.profiler_runs[run_index];
  if (final) {
    run.final_written = true;
    run.final_job_status = job.training_job_status();
  }
  std::vector<ProfilerRuleFinding> findings;
  findings.reserve(run.rules.size());
  for (const auto& rule : run.rules) findings.push_back(rule->Finding());
  ProfilerReportContext context;
  context.training_job_name = evaluation.job_name;
  context.rule_configuration_name = run.configuration_name;
  context.training_job_status = std::string(core::JobStatusName(job.training_job_status()));
  if (final && !JobSaysTrainingEnded(job) && !JobIsStopping(job)) {
    // The tensor trial was closed before anyone reported the job's end.
    absl::StrAppend(&context.training_job_status,
                    "; training data complete (training_job_end.ts written)");
  }
  context.generated_at = absl::Now();
  context.final = final;
  if (evaluation.system_reader != nullptr) {
    context.data_summary = evaluation.system_reader->Summary();
  }
  if (evaluation.framework_reader != nullptr) {
    absl::StrAppend(&context.data_summary, context.data_summary.empty() ? "" : "; ",
                    evaluation.framework_reader->Summary());
  }
  static const ProfilerReportData* const kEmpty = new ProfilerReportData();
  const ProfilerReportData& data =
      evaluation.report_data != nullptr ? *evaluation.report_data : *kEmpty;
  const core::ProfilerReportFiles files = core::ProfilerReportFilesFor(
      options_.report_dir, evaluation.job_name, run.configuration_name);
  // The JSON first: a reader that sees the new page finds its summary too.
  absl::Status written =
      WriteFileAtomically(files.json, RenderProfilerReportJson(data, findings, context));
  if (written.ok()) {
    written = WriteFileAtomically(files.html, RenderProfilerReportHtml(data, findings, context));
  }
  if (!written.ok()) {
    spdlog::warn("writing the profiling report of rule '{}' of job '{}' failed: {}",
                 run.configuration_name, evaluation.job_name, written.ToString());
  }
}

void EvaluationScheduler::RecordProgress(JobEvaluation& evaluation, bool force) {
  const absl::Time now = absl::Now();
  if (!force && now - evaluation.progress_recorded < options_.progress_interval) return;
  std::vector<std::pair<std::string, int64_t>> progress;
  for (auto& run : evaluation.rules) {
    if (run.done || run.last_step <= run.recorded_step) continue;
    progress.emplace_back(run.configuration_name, run.last_step);
    run.recorded_step = run.last_step;
  }
  if (progress.empty()) return;
  evaluation.progress_recorded = now;
  const std::string job = evaluation.job_name;
  // Queued behind this batch's verdicts, so a recorded step never runs
  // ahead of a verdict reached at or before it.
  manager_->RecordRuleProgress(job, std::move(progress), [job](const absl::Status& result) {
    if (!result.ok() && result.code() != absl::StatusCode::kNotFound) {
      spdlog::warn("recording rule progress of job '{}' failed: {}", job, result.ToString());
    }
  });
}

bool EvaluationScheduler::EnsureWatchesLocked(JobEvaluation& evaluation) {
  using objectstore::StoreLocation;
  if (notifier_ == nullptr) return false;
  constexpr uint32_t kEntries = objectstore::kEntryChanged;
  std::set<objectstore::ChangeNotifier::WatchId> keep;
  bool added = false;
  const auto watch = [&](const StoreLocation& dir, uint32_t events) {
    absl::StatusOr<objectstore::ChangeNotifier::WatchId> id = notifier_->Watch(dir, events);
    if (!id.ok()) return id.status();
    keep.insert(*id);
    if (watch_owners_[*id].insert(evaluation.job_name).second) {
      evaluation.watches.push_back(*id);
      added = true;
    }
    return absl::OkStatus();
  };
  // The directories of a tree the job needs now, `root` first. When `root`
  // does not exist yet, its nearest existing ancestor in the store instead,
  // to hear of its creation. Directories the store refuses (a symbolic link)
  // are not watched: the reader reports them.
  const auto tree = [&](const StoreLocation& root,
                        const std::vector<std::pair<StoreLocation, uint32_t>>& below) {
    absl::Status rooted = watch(root, kEntries);
    if (rooted.ok()) {
      for (const auto& [dir, events] : below) (void)watch(dir, events);
      return;
    }
    for (std::optional<StoreLocation> ancestor = Parent(root);
         absl::IsNotFound(rooted) && ancestor.has_value(); ancestor = Parent(*ancestor)) {
      rooted = watch(*ancestor, kEntries);
    }
  };
  bool debug_active = false;
  for (const auto& run : evaluation.rules) debug_active = debug_active || !run.done;
  if (debug_active && evaluation.trial.has_value()) {
    // The trial directory (training_job_end.ts, new subdirectories), index/
    // (its 000000000 subdirectory appears after it) and the index directory:
    // smdebug writes a step's index file after its event file, so a new index
    // file means a new step to read.
    const StoreLocation& trial = *evaluation.trial;
    tree(trial, {{trial.Below("index"), kEntries}, {trial.Below("index/000000000"), kEntries}});
  }
  bool profiler_active = false;
  for (const auto& run : evaluation.profiler_runs) {
    profiler_active = profiler_active || run.active();
  }
  if (profiler_active && evaluation.profiler.has_value()) {
    // The profiler appends to open files (system metrics every interval,
    // timelines as events come): appends in the newest hour directories,
    // new entries above them for the next hour.
    const StoreLocation& profiler = *evaluation.profiler;
    const StoreLocation system = profiler.Below("system/incremental");
    const StoreLocation framework = profiler.Below("framework/pevents");
    std::vector<std::pair<StoreLocation, uint32_t>> dirs = {
        {profiler.Below("system"), kEntries},
        {system, kEntries},
        {profiler.Below("framework"), kEntries},
        {framework, kEntries},
    };
    for (const StoreLocation& parent : {system, framework}) {
      if (std::optional<StoreLocation> hour = NewestSubdirectory(parent); hour.has_value()) {
        dirs.emplace_back(*std::move(hour), kEntries | objectstore::kObjectAppended);
      }
    }
    tree(profiler, dirs);
  }

  // Drop what is no longer needed: an ancestor (often the data root, shared
  // by every job) would otherwise wake this job for every other job's files,
  // and an old hour directory no longer grows.
  const std::vector<objectstore::ChangeNotifier::WatchId> current = evaluation.watches;
  for (const objectstore::ChangeNotifier::WatchId id : current) {
    if (keep.count(id) == 0) DropWatchLocked(evaluation, id);
  }
  return added;
}

void EvaluationScheduler::DropWatchLocked(JobEvaluation& evaluation,
                                          objectstore::ChangeNotifier::WatchId id) {
  evaluation.watches.erase(std::remove(evaluation.watches.begin(), evaluation.watches.end(), id),
                           evaluation.watches.end());
  auto owners = watch_owners_.find(id);
  if (owners == watch_owners_.end()) return;
  owners->second.erase(evaluation.job_name);
  if (owners->second.empty()) {
    if (notifier_ != nullptr) notifier_->Unwatch(id);
    watch_owners_.erase(owners);
  }
}

void EvaluationScheduler::DropWatchesLocked(JobEvaluation& evaluation) {
  while (!evaluation.watches.empty()) DropWatchLocked(evaluation, evaluation.watches.back());
}

void EvaluationScheduler::OnChange(objectstore::ChangeNotifier::WatchId id) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  auto owners = watch_owners_.find(id);
  if (owners == watch_owners_.end()) return;
  for (const std::string& name : owners->second) {
    auto job = jobs_.find(name);
    if (job != jobs_.end()) EnqueueLocked(job->second);
  }
}

void EvaluationScheduler::PollLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    const absl::Time deadline = absl::Now() + options_.poll_interval;
    while (!stopping_ && absl::Now() < deadline) {
      stop_cv_.WaitWithTimeout(&mu_, deadline - absl::Now());
    }
    if (stopping_) return;
    for (auto& [name, evaluation] : jobs_) EnqueueLocked(evaluation);
  }
}

}  // namespace debugplane::rules_engine
