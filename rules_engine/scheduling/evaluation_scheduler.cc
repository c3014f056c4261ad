#include "rules_engine/scheduling/evaluation_scheduler.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/jobs/output_path.h"
#include "core/jobs/rule_catalog.h"
#include "rules_engine/catalog/builtin_rules.h"
#include "rules_engine/profiler_rules/profiler_report_rules.h"
#include "rules_engine/scheduling/rule_verdicts.h"
#include "rules_engine/tensorboard/hook_collections.h"
#include "rules_engine/tensorboard/merged_trial.h"
#include "rules_engine/tensorboard/tensorboard_reader.h"
#include "spdlog/spdlog.h"

namespace debugplane::rules_engine {
namespace {

using core::JobRecord;

std::string RuleToInvoke(const google::protobuf::Map<std::string, std::string>& parameters) {
  const auto it = parameters.find("rule_to_invoke");
  return it == parameters.end() ? "" : it->second;
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

// Lowers the calling thread's CPU priority to `nice` (Linux: a thread's nice
// value is its own). Logged, not fatal, when refused: the thread then runs
// at the process's priority.
void LowerThisThreadsPriority(int nice) {
  if (nice <= 0) return;
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));
  if (setpriority(PRIO_PROCESS, tid, std::min(nice, 19)) != 0) {
    spdlog::warn("rule evaluation: cannot lower the priority of a backlog thread to nice {}: {}",
                 nice, std::strerror(errno));
  }
}

// Erases from `concluded` the rules whose status (statuses[i], beside
// configurations[i]) is no longer InProgress.
template <typename Configurations, typename Statuses>
void ForgetTerminal(const Configurations& configurations, const Statuses& statuses,
                    std::set<std::string>& concluded) {
  for (int i = 0; i < configurations.size() && i < statuses.size(); ++i) {
    if (statuses[i].rule_evaluation_status() != v1::RuleEvaluationStatus::InProgress) {
      concluded.erase(configurations[i].rule_configuration_name());
    }
  }
}

}  // namespace

EvaluationScheduler::EvaluationScheduler(core::TrainingJobManager* manager,
                                         EvaluationSchedulerOptions options)
    : manager_(manager), options_(WithLeases(std::move(options))) {}

EvaluationSchedulerOptions EvaluationScheduler::WithLeases(EvaluationSchedulerOptions options) {
  options.status_retries.leases = options.leases;
  return options;
}

EvaluationScheduler::~EvaluationScheduler() { Shutdown(); }

absl::StatusOr<objectstore::StoreLocation> EvaluationScheduler::ResolveOtherTrial(
    const std::string& other_trial) const {
  // A training job's name: its tensor output. Otherwise a trial path or URI,
  // confined to the data roots like any output path.
  std::string location = other_trial;
  if (auto job = manager_->GetJob(other_trial); job != nullptr) {
    // Its smdebug trial, else its TensorBoard logs.
    if (job->has_debug_hook_config()) {
      location = job->debug_hook_config().s3_output_path();
    } else if (job->has_tensor_board_output_config()) {
      location = job->tensor_board_output_config().s3_output_path();
    } else {
      return absl::FailedPreconditionError(
          absl::StrCat("other_trials: training job '", other_trial,
                       "' has neither DebugHookConfig nor TensorBoardOutputConfig, so no tensors"));
    }
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
  watcher_ = std::make_unique<TrialWatcher>(
      TrialWatcherOptions{.poll_interval = options_.poll_interval, .clock = options_.clock},
      [this](const std::string& job_name) { OnChange(job_name); }, [this] { OnPoll(); });
  custom_runner_ = std::make_unique<CustomEvaluatorRunner>(
      CustomEvaluatorRunner::Options{.max_concurrent = options_.custom_evaluator_concurrency});
  const int worker_threads = std::max(1, options_.worker_threads);
  backlog_threads_ = options_.backlog_threads < 0 ? worker_threads : options_.backlog_threads;
  for (int i = 0; i < worker_threads; ++i) {
    workers_.emplace_back([this] { WorkerLoop(/*backlog=*/false); });
  }
  for (int i = 0; i < backlog_threads_; ++i) {
    workers_.emplace_back([this] { WorkerLoop(/*backlog=*/true); });
  }

  core::ListenForJobLeases(options_.leases, this);
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
    backlog_cv_.SignalAll();
  }
  manager_->RemoveCommitObserver(observer_id_);
  // Evaluators still running are stopped; their rules stay InProgress and
  // run again at the next start.
  custom_runner_->Shutdown();
  for (auto& worker : workers_) worker.join();
  // Statuses still refused by the storage are dropped: those rules stay
  // InProgress and are evaluated again at the next start.
  status_recorder_.Shutdown();
  // Its threads stop here; OnChange and OnPoll see stopping_ meanwhile.
  watcher_->Shutdown();
}

void EvaluationScheduler::OnLeaseAcquired(const std::string& job_name) {
  std::shared_ptr<const JobRecord> job = manager_->GetJob(job_name);
  absl::MutexLock lock(&mu_);
  if (stopping_ || !started_ || job == nullptr) return;
  spdlog::info("rule evaluation: evaluating job '{}' (its lease is this replica's)", job_name);
  Apply(job_name, std::move(job));
}

void EvaluationScheduler::OnLeaseLost(const std::string& job_name) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || !started_) return;
  if (auto runs = custom_runs_.find(job_name); runs != custom_runs_.end()) {
    for (const auto& [rule, id] : runs->second) {
      if (id != 0) custom_runner_->Cancel(id);
    }
    custom_runs_.erase(runs);  // Started again if the lease comes back.
  }
  concluded_rules_.erase(job_name);  // The new holder evaluates them, or this one anew.
  if (auto finishing = finishing_.find(job_name); finishing != finishing_.end()) {
    for (const auto& evaluation : finishing->second) evaluation->cancelled = true;
    finishing_.erase(finishing);
  }
  auto it = jobs_.find(job_name);
  if (it == jobs_.end()) return;
  spdlog::info(
      "rule evaluation: stopped evaluating job '{}' (its lease is no longer this "
      "replica's)",
      job_name);
  it->second->cancelled = true;
  watcher_->Drop(job_name);
  jobs_.erase(it);
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

bool EvaluationScheduler::ConcludedHereLocked(const std::string& job_name,
                                              const std::string& rule_name,
                                              const bool profiler) const {
  auto found = concluded_rules_.find(job_name);
  if (found == concluded_rules_.end()) return false;
  const std::set<std::string>& names = profiler ? found->second.profiler : found->second.debug;
  return names.count(rule_name) > 0;
}

void EvaluationScheduler::ForgetRecordedVerdictsLocked(const std::string& job_name,
                                                       const JobRecord* job) {
  auto found = concluded_rules_.find(job_name);
  if (found == concluded_rules_.end()) return;
  if (job == nullptr || JobIsStopping(*job)) {
    concluded_rules_.erase(found);
    return;
  }
  ConcludedRules& concluded = found->second;
  ForgetTerminal(job->debug_rule_configurations(), job->debug_rule_evaluation_statuses(),
                 concluded.debug);
  ForgetTerminal(job->profiler_rule_configurations(), job->profiler_rule_evaluation_statuses(),
                 concluded.profiler);
  if (concluded.empty()) concluded_rules_.erase(found);
}

void EvaluationScheduler::Apply(const std::string& job_name, std::shared_ptr<const JobRecord> job) {
  FollowFinishingLocked(job_name, job);
  const int64_t version = job == nullptr ? -1 : core::ToUnixMicros(job->last_modified_time());
  auto it = jobs_.find(job_name);
  ForgetRecordedVerdictsLocked(job_name, job.get());
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
      watcher_->Drop(job_name);
      jobs_.erase(it);
      if (job != nullptr && evaluation->has_report && report_writer_.enabled()) {
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
  // Another replica's job (until this one acquires its lease).
  if (options_.leases != nullptr && !options_.leases->Holds(job_name)) return;
  std::shared_ptr<JobEvaluation> evaluation = NewEvaluationLocked(job_name, job);
  if (evaluation == nullptr) return;
  jobs_[job_name] = evaluation;
  EnqueueLocked(evaluation);
}

std::shared_ptr<JobEvaluation> EvaluationScheduler::NewEvaluationLocked(
    const std::string& job_name, const std::shared_ptr<const JobRecord>& job) {
  auto evaluation = std::make_shared<JobEvaluation>();
  evaluation->job_name = job_name;
  evaluation->record_time_us = core::ToUnixMicros(job->last_modified_time());
  evaluation->latest_job = job;
  std::vector<std::pair<std::string, std::string>> errors;
  std::vector<const v1::DebugRuleConfiguration*> custom;
  for (int i = 0; i < job->debug_rule_configurations_size(); ++i) {
    const v1::DebugRuleConfiguration& config = job->debug_rule_configurations(i);
    if (i >= job->debug_rule_evaluation_statuses_size() ||
        job->debug_rule_evaluation_statuses(i).rule_evaluation_status() !=
            v1::RuleEvaluationStatus::InProgress ||
        ConcludedHereLocked(job_name, config.rule_configuration_name(), /*profiler=*/false)) {
      continue;
    }
    if (!core::IsBuiltinRuleEvaluatorImage(config.rule_evaluator_image())) {
      custom.push_back(&config);
      continue;
    }
    RuleParameters parameters(config.rule_parameters().begin(), config.rule_parameters().end());
    const std::shared_ptr<base::Clock> clock = options_.clock;
    absl::StatusOr<std::unique_ptr<Rule>> rule = CreateBuiltinRule(
        RuleToInvoke(config.rule_parameters()), parameters,
        RuleContext{.now = [clock] { return clock->Now(); }, .other_trial = other_trial_lookup_});
    if (!rule.ok()) {
      errors.emplace_back(config.rule_configuration_name(), std::string(rule.status().message()));
      continue;
    }
    evaluation->rules.push_back({config.rule_configuration_name(), *std::move(rule), false});
  }
  for (auto& [rule_name, message] : errors) {
    evaluator_.RecordStatus(job_name, rule_name, v1::RuleEvaluationStatus::Error,
                            std::move(message));
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
  if (evaluation->rules.empty() && evaluation->profiler_runs.empty()) return nullptr;

  // Profiler rules only: no tensor trial to read.
  if (!evaluation->rules.empty()) OpenTrial(*evaluation, *job);
  return evaluation;
}

void EvaluationScheduler::OpenTrial(JobEvaluation& evaluation, const JobRecord& job) {
  const bool has_tensorboard = job.has_tensor_board_output_config() &&
                               !job.tensor_board_output_config().s3_output_path().empty();
  if (!job.has_debug_hook_config() && !has_tensorboard) {
    evaluation.trial_problem =
        "the job has no DebugHookConfig and no TensorBoardOutputConfig, so no tensors are read; "
        "add a TensorBoardOutputConfig whose S3OutputPath the training script's SummaryWriter "
        "writes to, or a DebugHookConfig with S3OutputPath and the collections the rule needs";
    return;
  }
  std::optional<objectstore::StoreLocation> tensorboard;
  if (has_tensorboard) {
    absl::StatusOr<objectstore::StoreLocation> resolved = ResolveForReading(
        stores_, job.tensor_board_output_config().s3_output_path(),
        "TensorBoardOutputConfig.S3OutputPath",
        "write TensorBoard logs to a local path (or file:// URI) under the server's --data-root");
    if (!resolved.ok()) {
      evaluation.trial_problem = std::string(resolved.status().message());
      return;
    }
    tensorboard = *std::move(resolved);
  }
  // A DebugHookConfig naming the TensorBoard location (or none) only gives
  // the collections' include_regex.
  const bool hook_is_tensorboard =
      tensorboard.has_value() &&
      (!job.has_debug_hook_config() || job.debug_hook_config().s3_output_path().empty() ||
       job.debug_hook_config().s3_output_path() ==
           job.tensor_board_output_config().s3_output_path());
  if (hook_is_tensorboard) {
    evaluation.tensorboard = tensorboard;
    evaluation.tensorboard_only = true;
    evaluation.reader = std::make_unique<tensorboard::TensorBoardReader>(
        *std::move(tensorboard), tensorboard::TensorBoardOptionsOf(job.debug_hook_config()));
    return;
  }
  absl::StatusOr<objectstore::StoreLocation> location = ResolveForReading(
      stores_, job.debug_hook_config().s3_output_path(), "DebugHookConfig.S3OutputPath",
      "save tensors to a local path (or file:// URI) under the server's --data-root");
  if (!location.ok()) {
    evaluation.trial_problem = std::string(location.status().message());
    return;
  }
  evaluation.trial = *location;
  evaluation.reader = std::make_unique<TrialReader>(*std::move(location));
  if (tensorboard.has_value()) {
    evaluation.tensorboard = tensorboard;
    evaluation.reader = std::make_unique<tensorboard::MergedTrial>(
        std::move(evaluation.reader),
        std::make_unique<tensorboard::TensorBoardReader>(
            *std::move(tensorboard), tensorboard::TensorBoardOptionsOf(job.debug_hook_config())));
  }
}

void EvaluationScheduler::OpenProfilerData(JobEvaluation& evaluation, const JobRecord& job) {
  absl::StatusOr<objectstore::StoreLocation> location = ResolveForReading(
      stores_, job.profiler_config().s3_output_path(), "ProfilerConfig.S3OutputPath",
      "profile to a local path (or file:// URI) under the server's --data-root");
  if (!location.ok()) {
    evaluation.profiler_problem = std::string(location.status().message());
  } else {
    evaluation.profiler = *std::move(location);
  }
  // PyTorch profiler traces are also looked for where TensorBoard output
  // goes (tensorboard_trace_handler's users put them there); a path the
  // server cannot read only means no traces from there.
  const std::string& tensorboard = job.tensor_board_output_config().s3_output_path();
  if (!tensorboard.empty() && tensorboard != job.profiler_config().s3_output_path()) {
    absl::StatusOr<objectstore::StoreLocation> traces = stores_.Resolve(tensorboard);
    if (traces.ok()) evaluation.more_trace_roots = {*std::move(traces)};
  }
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

bool EvaluationScheduler::AddProfilerRunsLocked(JobEvaluation& evaluation, const JobRecord& job,
                                                const bool pending) {
  const std::string& job_name = job.training_job_name();
  std::vector<JobEvaluation::ProfilerRun> runs;
  for (int i = 0; i < job.profiler_rule_configurations_size(); ++i) {
    const v1::ProfilerRuleConfiguration& config = job.profiler_rule_configurations(i);
    const std::string& name = config.rule_configuration_name();
    if (evaluation.profiler_run_names.count(name) > 0 ||
        ConcludedHereLocked(job_name, name, /*profiler=*/true)) {
      continue;
    }
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
      evaluator_.RecordStatus(
          job_name, name, v1::RuleEvaluationStatus::Error,
          absl::StrCat("profiler rule evaluator '", config.rule_evaluator_image(),
                       "' is not built in; custom evaluators run debugging rules only "
                       "(DebugRuleConfigurations)"));
      continue;
    }
    RuleParameters parameters(config.rule_parameters().begin(), config.rule_parameters().end());
    absl::StatusOr<std::vector<std::unique_ptr<ProfilerRule>>> rules =
        CreateProfilerRuleSet(rule_to_invoke, parameters);
    if (!rules.ok()) {
      evaluator_.RecordStatus(job_name, name, v1::RuleEvaluationStatus::Error,
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
    OpenProfilerData(evaluation, job);
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
      evaluator_.RecordStatus(
          job_name, rule, v1::RuleEvaluationStatus::Error,
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
    runs[rule] = custom_runner_->Start(
        std::move(evaluation), [this, job_name, rule](CustomEvaluationResult result) {
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
          evaluator_.RecordStatus(job_name, rule, StatusOf(result.verdict.kind),
                                  std::move(result.verdict.details));
        });
  }
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

void EvaluationScheduler::EnqueueBacklogLocked(const std::shared_ptr<JobEvaluation>& evaluation) {
  evaluation->queued = true;
  backlog_.push_back(evaluation);
  (backlog_threads_ > 0 ? backlog_cv_ : work_cv_).Signal();
}

void EvaluationScheduler::WorkerLoop(const bool backlog) {
  if (backlog) LowerThisThreadsPriority(options_.backlog_nice);
  // Without backlog threads the workers take backlog turns themselves, when
  // no job with new data waits.
  const bool takes_backlog = backlog || backlog_threads_ == 0;
  absl::CondVar& cv = backlog ? backlog_cv_ : work_cv_;
  while (true) {
    std::shared_ptr<JobEvaluation> evaluation;
    {
      absl::MutexLock lock(&mu_);
      const auto has_work = [&] {
        mu_.AssertHeld();
        return (!backlog && !ready_.empty()) || (takes_backlog && !backlog_.empty());
      };
      while (!stopping_ && !has_work()) cv.Wait(&mu_);
      if (stopping_) return;
      std::deque<std::shared_ptr<JobEvaluation>>& queue =
          !backlog && !ready_.empty() ? ready_ : backlog_;
      evaluation = std::move(queue.front());
      queue.pop_front();
      evaluation->queued = false;
      evaluation->running = true;
    }
    const TurnResult turn = RunTurn(*evaluation);
    absl::MutexLock lock(&mu_);
    AfterTurnLocked(evaluation, turn);
  }
}

namespace {

// How much of a job's data its readers have read, to tell whether a turn
// read any. REQUIRES: the caller owns the evaluation (its worker).
struct DataReadMark {
  int64_t amount = 0;
  int64_t last_step = -1;
};

DataReadMark MarkDataRead(const JobEvaluation& evaluation) {
  DataReadMark mark;
  if (evaluation.reader != nullptr) {
    const TrialSummary& summary = evaluation.reader->summary();
    mark.amount += summary.steps_seen;
    mark.last_step = summary.last_global_step;
  }
  if (evaluation.system_reader != nullptr) mark.amount += evaluation.system_reader->points_read();
  if (evaluation.framework_reader != nullptr) {
    mark.amount += evaluation.framework_reader->events_read();
    // PyTorch traces are counted apart from smdebug's timelines.
    mark.amount += evaluation.framework_reader->traces().events_read();
  }
  return mark;
}

}  // namespace

TurnResult EvaluationScheduler::RunTurn(JobEvaluation& evaluation) {
  std::shared_ptr<const JobRecord> job;
  bool finishing = false;
  std::vector<JobEvaluation::ProfilerRun> added;
  {
    absl::MutexLock lock(&mu_);
    job = evaluation.latest_job;
    finishing = evaluation.finishing;
    added.swap(evaluation.pending_profiler_runs);
  }
  if (!options_.on_data_read) return evaluator_.Turn(evaluation, *job, finishing, std::move(added));
  const DataReadMark before = MarkDataRead(evaluation);
  TurnResult turn = evaluator_.Turn(evaluation, *job, finishing, std::move(added));
  const DataReadMark after = MarkDataRead(evaluation);
  if (after.amount > before.amount) options_.on_data_read(evaluation.job_name, after.last_step);
  return turn;
}

void EvaluationScheduler::AfterTurnLocked(const std::shared_ptr<JobEvaluation>& evaluation,
                                          const TurnResult& turn) {
  evaluation->running = false;
  if (evaluation->finishing) {
    // Owes its final reports until they show the job's final status
    // (Apply enqueues it when that status is committed).
    if (evaluation->cancelled ||
        evaluator_.FinalReportsSettled(*evaluation, *evaluation->latest_job)) {
      StopFinishingLocked(evaluation);
    } else if (evaluation->rerun) {
      evaluation->rerun = false;
      EnqueueLocked(evaluation);
    }
    return;
  }
  const bool active = !evaluation->pending_profiler_runs.empty() ||
                      evaluation->DebugRulesActive() || evaluation->ProfilerRunsActive();
  if (!active || evaluation->cancelled) {
    auto it = jobs_.find(evaluation->job_name);
    if (it != jobs_.end() && it->second == evaluation) {
      watcher_->Drop(evaluation->job_name);
      jobs_.erase(it);
      if (!evaluation->cancelled) {
        ConcludedRules& concluded = concluded_rules_[evaluation->job_name];
        for (const JobEvaluation::RuleRun& run : evaluation->rules) {
          if (run.done) concluded.debug.insert(run.configuration_name);
        }
        for (const JobEvaluation::ProfilerRun& run : evaluation->profiler_runs) {
          if (run.status_done) concluded.profiler.insert(run.configuration_name);
        }
        if (concluded.empty()) concluded_rules_.erase(evaluation->job_name);
      }
      // Concluded before the job's final status was known (e.g. on
      // training_job_end.ts): the reports are written again with it.
      if (!evaluation->cancelled &&
          !evaluator_.FinalReportsSettled(*evaluation, *evaluation->latest_job)) {
        evaluation->rerun = false;
        StartFinishingLocked(evaluation);
        if (core::IsTerminal(evaluation->latest_job->training_job_status())) {
          EnqueueLocked(evaluation);
        }
      }
    }
    return;
  }
  // A watch added now misses what landed since this evaluation listed the
  // trial: evaluate once more. A turn that stopped at its budget goes to the
  // back of the backlog queue: its next turn reads (at least) what it left,
  // and then whatever is new, so the job is never in both queues.
  if (UpdateWatchesLocked(*evaluation)) evaluation->rerun = true;
  if (turn.more_data) {
    evaluation->rerun = false;
    EnqueueBacklogLocked(evaluation);
  } else if (evaluation->rerun) {
    evaluation->rerun = false;
    EnqueueLocked(evaluation);
  }
}

bool EvaluationScheduler::UpdateWatchesLocked(const JobEvaluation& evaluation) {
  WatchedOutputs outputs;
  if (evaluation.DebugRulesActive()) {
    outputs.trial = evaluation.trial;
    outputs.tensorboard = evaluation.tensorboard;
  }
  if (evaluation.ProfilerRunsActive()) {
    outputs.profiler = evaluation.profiler;
    outputs.traces = evaluation.more_trace_roots;
  }
  return watcher_->Update(evaluation.job_name, outputs);
}

void EvaluationScheduler::OnChange(const std::string& job_name) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  auto job = jobs_.find(job_name);
  if (job != jobs_.end()) EnqueueLocked(job->second);
}

void EvaluationScheduler::OnPoll() {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  for (auto& [name, evaluation] : jobs_) {
    // Jobs on object storage are probed by the watcher on their own schedule
    // (trial_watcher.h, ListPolling): a pass here would list them every
    // poll_interval whatever the policy.
    if (watcher_->ListPolled(name)) continue;
    EnqueueLocked(evaluation);
  }
}

}  // namespace debugplane::rules_engine
