#include "rules_engine/scheduling/job_evaluation.h"

#include <algorithm>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/jobs/output_path.h"
#include "core/jobs/rule_catalog.h"
#include "rules_engine/profiler_rules/profiler_report_rules.h"
#include "rules_engine/scheduling/rule_verdicts.h"
#include "spdlog/spdlog.h"

namespace debugplane::rules_engine {
namespace {

using core::JobRecord;

// Whether training has ended: the one notion on which debugging rules and
// profiler rules conclude. The job says so, or the tensor trial ended and
// was read to its end (TrialReader::finished: with one worker its
// training_job_end.ts; with several, every worker writes that same file when
// it exits, so only the job's status tells that all of them did).
// REQUIRES: `reader` (if any) was told of the job's end (SetTrainingEnded)
// before its last read, as Turn does.
bool TrainingHasEnded(const JobRecord& job, const TensorTrial* reader) {
  return JobSaysTrainingEnded(job) || (reader != nullptr && reader->finished());
}

// How far the trial reader has read; absent before it read anything.
std::optional<v1::RuleReadProgress> TrialReadProgress(const JobEvaluation& evaluation) {
  if (evaluation.reader == nullptr) return std::nullopt;
  const TrialSummary& summary = evaluation.reader->summary();
  if (summary.read.objects == 0 && summary.last_global_step < 0) return std::nullopt;
  v1::RuleReadProgress progress;
  progress.set_bytes_read(summary.read.bytes);
  progress.set_objects_read(summary.read.objects);
  if (summary.last_global_step >= 0) progress.set_last_step_read(summary.last_global_step);
  return progress;
}

// How far the profiler readers have read together; absent before they read.
std::optional<v1::RuleReadProgress> ProfilerReadProgress(const JobEvaluation& evaluation) {
  objectstore::ReadTally tally;
  if (evaluation.system_reader != nullptr) tally += evaluation.system_reader->read_tally();
  if (evaluation.framework_reader != nullptr) tally += evaluation.framework_reader->read_tally();
  if (tally.objects == 0) return std::nullopt;
  v1::RuleReadProgress progress;
  progress.set_bytes_read(tally.bytes);
  progress.set_objects_read(tally.objects);
  return progress;
}

// Bytes the profiler readers have fetched (0 before they exist).
int64_t ProfilerBytesRead(const JobEvaluation& evaluation) {
  int64_t bytes = 0;
  if (evaluation.system_reader != nullptr) bytes += evaluation.system_reader->read_tally().bytes;
  if (evaluation.framework_reader != nullptr) {
    bytes += evaluation.framework_reader->read_tally().bytes;
  }
  return bytes;
}

// `now` differs from what was `recorded` (and is something).
bool ReadProgressChanged(const std::optional<v1::RuleReadProgress>& now,
                         const std::optional<v1::RuleReadProgress>& recorded) {
  if (!now.has_value()) return false;
  return !recorded.has_value() || now->SerializeAsString() != recorded->SerializeAsString();
}

}  // namespace

bool JobIsStopping(const JobRecord& job) {
  return job.training_job_status() == v1::TrainingJobStatus::Stopping ||
         job.training_job_status() == v1::TrainingJobStatus::Stopped;
}

// Every training process has exited: no file will be written any more.
bool JobSaysTrainingEnded(const JobRecord& job) {
  return core::IsTerminal(job.training_job_status());
}

bool JobEvaluation::DebugRulesActive() const {
  return std::any_of(rules.begin(), rules.end(), [](const RuleRun& run) { return !run.done; });
}

bool JobEvaluation::ProfilerRunsActive() const {
  return std::any_of(profiler_runs.begin(), profiler_runs.end(),
                     [](const ProfilerRun& run) { return run.active(); });
}

JobEvaluator::JobEvaluator(core::TrainingJobManager* manager, RuleStatusRecorder* recorder,
                           const ReportWriter* reports, JobEvaluatorOptions options)
    : manager_(manager), recorder_(recorder), reports_(reports), options_(std::move(options)) {}

void JobEvaluator::RecordStatus(const std::string& job, const std::string& rule, int status,
                                std::string details, int64_t last_evaluated_step,
                                std::optional<v1::RuleReadProgress> read,
                                std::function<void()> on_durable) const {
  recorder_->Record(job, rule, last_evaluated_step, static_cast<core::RuleStatus>(status),
                    SanitizeStatusDetails(std::move(details)), std::move(read),
                    std::move(on_durable));
}

bool JobEvaluator::FinalReportsSettled(const JobEvaluation& evaluation,
                                       const JobRecord& job) const {
  if (!reports_->enabled()) return true;
  const bool terminal = core::IsTerminal(job.training_job_status());
  for (const auto& run : evaluation.profiler_runs) {
    if (!run.report) continue;
    if (!run.report_schedule.final_written || !terminal ||
        run.report_schedule.final_job_status != job.training_job_status()) {
      return false;
    }
  }
  return true;
}

TurnResult JobEvaluator::Turn(JobEvaluation& evaluation, const JobRecord& job, bool finishing,
                              std::vector<JobEvaluation::ProfilerRun> added) const {
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
      const ReportSchedule& schedule = evaluation.profiler_runs[i].report_schedule;
      if (evaluation.profiler_runs[i].report && reports_->enabled() &&
          (!schedule.final_written || schedule.final_job_status != job.training_job_status())) {
        WriteReport(evaluation, i, job, /*final=*/true);
      }
    }
    return {};
  }
  // The job's end is told to the reader before it reads: its listings then
  // see every file training wrote (the last complete read).
  if (evaluation.reader != nullptr && JobSaysTrainingEnded(job)) {
    evaluation.reader->SetTrainingEnded();
  }
  TurnResult result;
  if (evaluation.DebugRulesActive()) result = EvaluateDebugRules(evaluation, job);
  if (!evaluation.profiler_runs.empty() && !evaluation.cancelled) {
    const int64_t profiler_bytes_before = ProfilerBytesRead(evaluation);
    EvaluateProfilerRules(evaluation, job);
    if (options_.metrics != nullptr) {
      options_.metrics->AddBytesRead(metrics::ReadSource::kProfiler,
                                     ProfilerBytesRead(evaluation) - profiler_bytes_before);
    }
  }
  if (!evaluation.cancelled) RecordProgress(evaluation);
  return result;
}

void JobEvaluator::Report(JobEvaluation& evaluation, size_t rule_index, int status,
                          std::string details, absl::Time data_arrived) const {
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
  // Detection latency: from the step's arrival to this IssuesFound being
  // durable (what a watcher or an action sees).
  std::function<void()> on_durable;
  if (options_.metrics != nullptr && status == v1::RuleEvaluationStatus::IssuesFound &&
      data_arrived != absl::InfinitePast()) {
    on_durable = [metrics = options_.metrics, clock = options_.clock, data_arrived] {
      metrics->ObserveDetectionLatency(clock->Now() - data_arrived);
    };
  }
  // A rule's report is final once it concluded, whatever the status; it is
  // written first, so that whoever sees the terminal status finds it.
  WriteRuleReport(evaluation, rule_index, /*final=*/true);
  RecordStatus(evaluation.job_name, run.configuration_name, status, std::move(details), last_step,
               TrialReadProgress(evaluation), std::move(on_durable));
}

void JobEvaluator::ReportVerdict(JobEvaluation& evaluation, size_t rule_index, RuleVerdict verdict,
                                 absl::Time data_arrived) const {
  if (verdict.kind == RuleVerdict::Kind::kIssuesFound ||
      verdict.kind == RuleVerdict::Kind::kError) {
    Report(evaluation, rule_index, StatusOf(verdict.kind), std::move(verdict.details),
           data_arrived);
  }
}

namespace {

// Whether some rule of `evaluation` still running wants `tensor`; memoized
// per tensor until the number of active rules or of collections changes.
bool AnyActiveRuleWants(JobEvaluation& evaluation, const std::string& tensor,
                        const TrialInfo& info) {
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
}

}  // namespace

void JobEvaluator::ReportTensorBoardGaps(JobEvaluation& evaluation) const {
  for (size_t i = 0; i < evaluation.rules.size(); ++i) {
    auto& run = evaluation.rules[i];
    if (run.done) continue;
    const absl::string_view gap = core::TensorBoardGap(run.rule->name());
    if (gap.empty()) continue;
    Report(evaluation, i, v1::RuleEvaluationStatus::Error,
           absl::StrCat(run.rule->name(), " cannot evaluate TensorBoard logs: ", gap,
                        ". The job's tensors come from TensorBoardOutputConfig only; give it a "
                        "DebugHookConfig whose hook saves what the rule reads"));
  }
}

void JobEvaluator::ReportToActiveRules(JobEvaluation& evaluation, int status,
                                       const std::string& details) const {
  for (size_t i = 0; i < evaluation.rules.size(); ++i) {
    if (!evaluation.rules[i].done) Report(evaluation, i, status, details);
  }
}

TurnResult JobEvaluator::EvaluateDebugRules(JobEvaluation& evaluation, const JobRecord& job) const {
  if (!evaluation.trial_problem.empty()) {
    ReportToActiveRules(evaluation, v1::RuleEvaluationStatus::Error, evaluation.trial_problem);
    return {};
  }
  if (evaluation.tensorboard_only) ReportTensorBoardGaps(evaluation);
  const StepReading reading = ReadAndEvaluateSteps(evaluation);
  if (reading != StepReading::kStop) WriteDueRuleReports(evaluation);
  switch (reading) {
    case StepReading::kStop:
      return {};
    case StepReading::kMoreData:
      // Ticks and the conclusion wait for the turn that reads the rest.
      return {.more_data = true};
    case StepReading::kCaughtUp:
      break;
  }
  TickDebugRules(evaluation);
  // Conclude only after the read that saw the end (finished: no step left).
  const bool ended =
      TrainingHasEnded(job, evaluation.reader.get()) && evaluation.reader->finished();
  if (ended && !evaluation.cancelled) ConcludeDebugRules(evaluation);
  return {};
}

JobEvaluator::StepReading JobEvaluator::ReadAndEvaluateSteps(JobEvaluation& evaluation) const {
  // Read in small batches until nothing is new or the turn's budget is
  // spent: a job replaying a large trial then yields its worker to the
  // others every turn_time_slice (or max_steps_per_turn steps). The reader
  // gets what is left of the slice, so that neither its index pass over a
  // backlog nor a batch of large steps runs past it (by one step at most).
  const base::Clock& clock = *options_.clock;
  const absl::Time deadline = clock.Now() + options_.turn_time_slice;
  const size_t per_read = std::max<size_t>(1, options_.steps_per_read);
  const size_t max_steps = std::max<size_t>(1, options_.max_steps_per_turn);
  size_t steps_read = 0;
  // What this turn read, for the metrics (whichever way it returns).
  const int64_t bytes_before = evaluation.reader->summary().read.bytes;
  absl::Cleanup record_reads = [&] { RecordReadMetrics(evaluation, bytes_before, steps_read); };
  auto wanted = [&evaluation](const std::string& tensor, const TrialInfo& info) {
    return AnyActiveRuleWants(evaluation, tensor, info);
  };
  while (true) {
    const ReadBudget budget{.max_steps = std::min(per_read, max_steps - steps_read),
                            .deadline = deadline,
                            .now = [&clock] { return clock.Now(); }};
    // A step whose files' times the store does not give arrived, as far as
    // this server can tell, when this read first saw it.
    const absl::Time read_started = clock.Now();
    absl::StatusOr<std::vector<Step>> steps = evaluation.reader->ReadNewSteps(wanted, budget);
    if (!steps.ok()) {
      ReportReadFailure(evaluation, steps.status());
      return StepReading::kStop;
    }
    if (!FeedSteps(evaluation, *steps, read_started)) return StepReading::kStop;
    steps_read += steps->size();
    // Nothing more now, or nothing left to evaluate.
    if (!evaluation.reader->stopped_at_budget() || !evaluation.DebugRulesActive()) break;
    if (steps_read >= max_steps || clock.Now() >= deadline) return StepReading::kMoreData;
  }
  return StepReading::kCaughtUp;
}

void JobEvaluator::RecordReadMetrics(const JobEvaluation& evaluation, int64_t bytes_before,
                                     size_t steps_read) const {
  if (options_.metrics == nullptr || evaluation.reader == nullptr) return;
  const TensorTrial& reader = *evaluation.reader;
  options_.metrics->AddBytesRead(metrics::ReadSource::kTensors,
                                 reader.summary().read.bytes - bytes_before);
  options_.metrics->AddStepsRead(static_cast<int64_t>(steps_read));
  if (reader.newest_step_seen() >= 0) {
    options_.metrics->ObserveEvaluationLag(reader.newest_step_seen() -
                                           reader.summary().last_global_step);
  }
}

void JobEvaluator::ReportReadFailure(JobEvaluation& evaluation, const absl::Status& error) const {
  // A store that answered before and is unreachable now (object storage
  // going away mid-run) is waited for: the reader keeps its place and the
  // watcher wakes the job when the store answers again. Unreachable from the
  // start, it is more likely misconfigured: an Error naming it.
  const bool read_before = std::any_of(evaluation.rules.begin(), evaluation.rules.end(),
                                       [](const auto& run) { return run.last_step >= 0; });
  if (absl::IsUnavailable(error) && read_before) {
    spdlog::warn("job '{}': waiting for its training data to be readable again: {}",
                 evaluation.job_name, error.ToString());
    return;
  }
  ReportToActiveRules(evaluation, v1::RuleEvaluationStatus::Error,
                      absl::StrCat("cannot read the training data in ",
                                   evaluation.reader->summary().path, ": ", error.message()));
}

bool JobEvaluator::FeedSteps(JobEvaluation& evaluation, const std::vector<Step>& steps,
                             absl::Time read_started) const {
  const TrialInfo& info = evaluation.reader->info();
  for (const Step& step : steps) {
    if (evaluation.cancelled) return false;
    const absl::Time arrived = step.written != absl::InfinitePast() ? step.written : read_started;
    for (size_t i = 0; i < evaluation.rules.size(); ++i) {
      auto& run = evaluation.rules[i];
      if (run.done) continue;
      run.last_step = step.global_step;
      run.report_schedule.stale = true;
      ReportVerdict(evaluation, i, run.rule->OnStep(step, info), arrived);
    }
  }
  return true;
}

void JobEvaluator::TickDebugRules(JobEvaluation& evaluation) const {
  // Time-driven rules (StalledTrainingRule): the poll pass brings every job
  // here at least once per poll interval, which bounds how late a tick is.
  const absl::Time now = options_.clock->Now();
  for (size_t i = 0; i < evaluation.rules.size(); ++i) {
    auto& run = evaluation.rules[i];
    if (run.done) continue;
    const absl::optional<absl::Time> deadline = run.rule->NextDeadline();
    if (!deadline.has_value() || *deadline > now) continue;
    ReportVerdict(evaluation, i, run.rule->OnTick(now));
  }
}

void JobEvaluator::ConcludeDebugRules(JobEvaluation& evaluation) const {
  const TrialInfo& info = evaluation.reader->info();
  for (size_t i = 0; i < evaluation.rules.size(); ++i) {
    auto& run = evaluation.rules[i];
    if (run.done) continue;
    RuleVerdict verdict = run.rule->OnTrainingEnd(info);
    switch (verdict.kind) {
      case RuleVerdict::Kind::kIssuesFound:
        Report(evaluation, i, v1::RuleEvaluationStatus::IssuesFound, std::move(verdict.details));
        break;
      case RuleVerdict::Kind::kError:
        Report(evaluation, i, v1::RuleEvaluationStatus::Error,
               ErrorWithTrialDescription(std::move(verdict.details), evaluation.reader->summary()));
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

void JobEvaluator::ReplayProfilerRules(JobEvaluation& evaluation) const {
  // Start over, as after a restart: fresh readers, fresh rules (they are
  // deterministic, so the ones already running reach the same state again),
  // the recorded statuses kept, so nothing is reported twice.
  evaluation.system_reader.reset();
  evaluation.framework_reader.reset();
  evaluation.plausible_times = PlausibleTimes();
  evaluation.report_data.reset();
  for (auto& run : evaluation.profiler_runs) {
    absl::StatusOr<std::vector<std::unique_ptr<ProfilerRule>>> rules =
        CreateProfilerRuleSet(run.rule_to_invoke, run.parameters);
    if (rules.ok()) run.rules = *std::move(rules);  // Made once already: cannot fail.
    run.report_schedule.stale = true;
  }
}

void JobEvaluator::ReportProfilerStatus(JobEvaluation& evaluation, JobEvaluation::ProfilerRun& run,
                                        int status, std::string details) const {
  run.status_done = true;
  run.report_schedule.stale = true;
  RecordStatus(evaluation.job_name, run.configuration_name, status, std::move(details),
               /*last_evaluated_step=*/-1, ProfilerReadProgress(evaluation));
}

void JobEvaluator::EvaluateProfilerRules(JobEvaluation& evaluation, const JobRecord& job) const {
  if (!evaluation.profiler_problem.empty()) {
    for (JobEvaluation::ProfilerRun& run : evaluation.profiler_runs) {
      if (!run.status_done) {
        ReportProfilerStatus(evaluation, run, v1::RuleEvaluationStatus::Error,
                             evaluation.profiler_problem);
      }
      run.report_schedule.final_written = true;  // Nothing to draw a report from.
    }
    return;
  }
  // The same notion as the debugging rules': rules conclude, and reports
  // are final, on the read made once training ended, so a status's details
  // and the final report come from the same complete read.
  const bool ended = TrainingHasEnded(job, evaluation.reader.get());
  const ProfilerBatch batch = ReadProfilerData(evaluation);
  FailRunsOverReadLimit(evaluation);
  const bool new_data = !batch.points.empty() || !batch.events.empty();
  if (batch.for_report && new_data) {
    evaluation.report_data->AddMetrics(batch.points);
    evaluation.report_data->AddFrameworkEvents(batch.events);
  }
  if (evaluation.cancelled) return;
  FeedProfilerData(evaluation, batch);
  if (ended) ConcludeProfilerRules(evaluation, job);
  WriteDueReports(evaluation, job, ended);
}

JobEvaluator::ProfilerBatch JobEvaluator::ReadProfilerData(JobEvaluation& evaluation) const {
  // Read only what some active rule (or report) wants.
  bool want_system = false;
  bool want_framework = false;
  ProfilerBatch batch;
  for (const JobEvaluation::ProfilerRun& run : evaluation.profiler_runs) {
    if (!run.active()) continue;
    batch.for_report = batch.for_report || run.report;
    for (const auto& rule : run.rules) {
      want_system = want_system || rule->WantsSystemMetrics();
      want_framework = want_framework || rule->WantsFrameworkEvents();
    }
  }
  if (batch.for_report) {
    want_system = want_framework = true;
    if (evaluation.report_data == nullptr) {
      evaluation.report_data = std::make_unique<ProfilerReportData>();
    }
  }
  if (want_system) {
    if (evaluation.system_reader == nullptr) {
      evaluation.system_reader = std::make_unique<SystemMetricsReader>(*evaluation.profiler);
    }
    batch.points = evaluation.system_reader->ReadNew();
    evaluation.plausible_times.FilterMetrics(&batch.points, options_.clock->Now());
  }
  if (want_framework) {
    if (evaluation.framework_reader == nullptr) {
      evaluation.framework_reader = std::make_unique<FrameworkTimelineReader>(
          *evaluation.profiler, evaluation.more_trace_roots);
    }
    batch.events = evaluation.framework_reader->ReadNew();
    evaluation.plausible_times.FilterEvents(&batch.events, options_.clock->Now());
  }
  return batch;
}

void JobEvaluator::FailRunsOverReadLimit(JobEvaluation& evaluation) const {
  // A file over its read limit (a sparse 100 GB file, a line without an
  // end): the data these rules would conclude on is known to be
  // incomplete, so each run that reads it ends in an Error naming the file
  // and the limit (the readers read no more of that file, so this holds
  // after a restart too).
  const absl::Status& system_limit = evaluation.system_reader != nullptr
                                         ? evaluation.system_reader->limit_error()
                                         : absl::OkStatus();
  const absl::Status& framework_limit = evaluation.framework_reader != nullptr
                                            ? evaluation.framework_reader->limit_error()
                                            : absl::OkStatus();
  if (system_limit.ok() && framework_limit.ok()) return;
  for (JobEvaluation::ProfilerRun& run : evaluation.profiler_runs) {
    if (!run.active() || run.status_done) continue;
    const absl::Status* over = nullptr;
    for (const auto& rule : run.rules) {
      if ((run.report || rule->WantsSystemMetrics()) && !system_limit.ok()) {
        over = &system_limit;
      } else if ((run.report || rule->WantsFrameworkEvents()) && !framework_limit.ok()) {
        over = &framework_limit;
      }
      if (over != nullptr) break;
    }
    if (over == nullptr) continue;
    ReportProfilerStatus(evaluation, run, v1::RuleEvaluationStatus::Error,
                         absl::StrCat("cannot read the profiler data: ", over->message()));
  }
}

void JobEvaluator::FeedProfilerData(JobEvaluation& evaluation, const ProfilerBatch& batch) const {
  const bool new_data = !batch.points.empty() || !batch.events.empty();
  const absl::Time now = options_.clock->Now();
  for (JobEvaluation::ProfilerRun& run : evaluation.profiler_runs) {
    if (!run.active()) continue;
    if (new_data) run.report_schedule.stale = true;
    for (const auto& rule : run.rules) {
      RuleVerdict verdict;
      if (rule->WantsSystemMetrics() && !batch.points.empty()) {
        verdict = rule->OnMetrics(batch.points);
      }
      if (verdict.kind == RuleVerdict::Kind::kContinue && rule->WantsFrameworkEvents() &&
          !batch.events.empty()) {
        verdict = rule->OnFrameworkEvents(batch.events);
      }
      if (verdict.kind == RuleVerdict::Kind::kContinue) verdict = rule->OnTick(now);
      if (verdict.kind != RuleVerdict::Kind::kIssuesFound || run.status_done) continue;
      if (!run.report) {
        ReportProfilerStatus(evaluation, run, v1::RuleEvaluationStatus::IssuesFound,
                             std::move(verdict.details));
        continue;
      }
      const std::string report_note =
          reports_->enabled()
              ? absl::StrCat(
                    " (report: ",
                    reports_->FilesFor(evaluation.job_name, run.configuration_name).html.string(),
                    ")")
              : "";
      ReportProfilerStatus(evaluation, run, v1::RuleEvaluationStatus::IssuesFound,
                           absl::StrCat(rule->name(), ": ", verdict.details, report_note));
    }
  }
}

namespace {

// What the profiler readers read, for verdicts that saw too little: their
// summaries, the samples skipped for implausible times, and whether
// profiling was disabled.
std::string ProfilerReadSummary(const JobEvaluation& evaluation, const JobRecord& job) {
  std::string read;
  if (evaluation.system_reader != nullptr) read = evaluation.system_reader->Summary();
  if (evaluation.framework_reader != nullptr) {
    absl::StrAppend(&read, read.empty() ? "" : "; ", evaluation.framework_reader->Summary());
  }
  const std::string skipped = evaluation.plausible_times.Summary();
  if (!skipped.empty()) absl::StrAppend(&read, read.empty() ? "" : "; ", skipped);
  if (job.profiler_config().disable_profiler()) {
    absl::StrAppend(&read, "; profiling is disabled (ProfilerConfig.DisableProfiler)");
  }
  return read;
}

}  // namespace

void JobEvaluator::ConcludeProfilerRules(JobEvaluation& evaluation, const JobRecord& job) const {
  const std::string read = ProfilerReadSummary(evaluation, job);
  const std::string skipped = evaluation.plausible_times.Summary();
  for (JobEvaluation::ProfilerRun& run : evaluation.profiler_runs) {
    if (!run.active()) continue;
    run.report_schedule.stale = true;
    std::vector<std::string> errors;  // Rules of a report run without data.
    for (const auto& rule : run.rules) {
      RuleVerdict verdict = rule->OnEnd();
      if (run.status_done) continue;
      if (!run.report) {
        if (verdict.kind == RuleVerdict::Kind::kError) {
          absl::StrAppend(&verdict.details, ". Read: ", read);
        } else if (!skipped.empty()) {
          // The verdict is on what was kept: say what was not.
          absl::StrAppend(&verdict.details, " (", skipped, ")");
        }
        ReportProfilerStatus(evaluation, run, StatusOf(verdict.kind), std::move(verdict.details));
      } else if (verdict.kind == RuleVerdict::Kind::kIssuesFound) {
        ReportProfilerStatus(evaluation, run, v1::RuleEvaluationStatus::IssuesFound,
                             absl::StrCat(rule->name(), ": ", verdict.details));
      } else if (verdict.kind == RuleVerdict::Kind::kError) {
        errors.push_back(rule->name());
      }
    }
    if (run.status_done) continue;
    if (errors.size() == run.rules.size()) {
      ReportProfilerStatus(evaluation, run, v1::RuleEvaluationStatus::Error,
                           absl::StrCat("no profiling data to evaluate: ", read));
      continue;
    }
    const std::string without_data =
        errors.empty()
            ? ""
            : absl::StrCat(" (", absl::StrJoin(errors, ", "), " had no data to evaluate)");
    ReportProfilerStatus(evaluation, run, v1::RuleEvaluationStatus::NoIssuesFound,
                         absl::StrCat(run.rules.size(), " rules evaluated, no issues found",
                                      without_data, ". Read: ", read));
  }
}

void JobEvaluator::WriteDueReports(JobEvaluation& evaluation, const JobRecord& job,
                                   bool ended) const {
  for (size_t i = 0; i < evaluation.profiler_runs.size(); ++i) {
    JobEvaluation::ProfilerRun& run = evaluation.profiler_runs[i];
    if (!run.report || run.report_schedule.final_written || !reports_->enabled()) {
      if (ended) run.report_schedule.final_written = true;
      continue;
    }
    // Regenerated at most once per report_interval while data arrives, and
    // at once the first time and at the end.
    if (ended || reports_->Due(run.report_schedule)) WriteReport(evaluation, i, job, ended);
  }
}

void JobEvaluator::WriteReport(JobEvaluation& evaluation, size_t run_index, const JobRecord& job,
                               bool final) const {
  // Another replica holds the job now: its reports are that replica's.
  const core::WriteFence fence = core::FenceForWrite(options_.leases, evaluation.job_name);
  if (!fence.allowed) return;
  JobEvaluation::ProfilerRun& run = evaluation.profiler_runs[run_index];
  ReportContent content;
  content.findings.reserve(run.rules.size());
  for (const auto& rule : run.rules) content.findings.push_back(rule->Finding());
  ProfilerReportContext& context = content.context;
  context.training_job_name = evaluation.job_name;
  context.rule_configuration_name = run.configuration_name;
  context.training_job_status = std::string(core::JobStatusName(job.training_job_status()));
  if (final && !JobSaysTrainingEnded(job) && !JobIsStopping(job)) {
    // The tensor trial was closed before anyone reported the job's end.
    absl::StrAppend(&context.training_job_status,
                    "; training data complete (training_job_end.ts written)");
  }
  if (evaluation.system_reader != nullptr) {
    context.data_summary = evaluation.system_reader->Summary();
  }
  if (evaluation.framework_reader != nullptr) {
    absl::StrAppend(&context.data_summary, context.data_summary.empty() ? "" : "; ",
                    evaluation.framework_reader->Summary());
  }
  if (const std::string skipped = evaluation.plausible_times.Summary(); !skipped.empty()) {
    absl::StrAppend(&context.data_summary, context.data_summary.empty() ? "" : "; ", skipped);
  }
  static const ProfilerReportData* const kEmpty = new ProfilerReportData();
  content.data = evaluation.report_data != nullptr ? evaluation.report_data.get() : kEmpty;
  const absl::Status written =
      reports_->Write(evaluation.job_name, run.configuration_name, std::move(content), final,
                      job.training_job_status(), fence.fence, run.report_schedule);
  if (!written.ok()) {
    spdlog::warn("writing the profiling report of rule '{}' of job '{}' failed: {}",
                 run.configuration_name, evaluation.job_name, written.ToString());
  }
}

void JobEvaluator::RecordProgress(JobEvaluation& evaluation) const {
  const absl::Time now = options_.clock->Now();
  if (now - evaluation.progress_recorded < options_.progress_interval) return;
  std::vector<core::RuleProgress> progress;
  const std::optional<v1::RuleReadProgress> trial_read = TrialReadProgress(evaluation);
  const bool trial_read_changed = ReadProgressChanged(trial_read, evaluation.trial_read_recorded);
  for (auto& run : evaluation.rules) {
    if (run.done) continue;
    const bool step_advanced = run.last_step > run.recorded_step;
    if (!step_advanced && !trial_read_changed) continue;
    core::RuleProgress& rule = progress.emplace_back();
    rule.rule = run.configuration_name;
    if (step_advanced) rule.last_evaluated_step = run.last_step;
    if (trial_read_changed) rule.read = trial_read;
    run.recorded_step = run.last_step;
  }
  if (trial_read_changed) evaluation.trial_read_recorded = trial_read;
  // The profiler rules' ReadProgress travels with their statuses only
  // (report_status in EvaluateProfilerRules), not as progress during the
  // run: each such commit reaching the scheduler after the rule concluded
  // still shows it InProgress (the scheduler's concluded_rules_ now keeps
  // that from starting it again, see
  // ProfilerSchedulingTest.AReportConcludedOnTheTrialsEndIsNotStartedAgain).
  if (progress.empty()) return;
  const core::WriteFence fence = core::FenceForWrite(options_.leases, evaluation.job_name);
  if (!fence.allowed) return;  // The lease is lost: the new holder records it.
  evaluation.progress_recorded = now;
  const std::string job = evaluation.job_name;
  // Queued behind this turn's verdicts, so a recorded step never runs
  // ahead of a verdict reached at or before it.
  manager_->RecordRuleProgress(
      job, std::move(progress),
      [job](const absl::Status& result) {
        if (!result.ok() && result.code() != absl::StatusCode::kNotFound) {
          spdlog::warn("recording rule progress of job '{}' failed: {}", job, result.ToString());
        }
      },
      fence.fence);
}

}  // namespace debugplane::rules_engine
