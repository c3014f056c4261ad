// JobEvaluation and JobEvaluator: one job's rule evaluation state, and the
// code that advances it by one turn on a worker (read what is new, feed it
// to the job's rules, record verdicts and progress, write reports).
//
// Work is per job, not per rule: one TrialReader per job reads each new step
// once, decoding only the tensors some rule of the job wants, and feeds it to
// all the job's debugging rules; the profiler readers likewise feed all its
// profiler rules.
//
// Fairness: a turn is bounded (max_steps_per_turn steps, and the time slice
// turn_time_slice by the clock). A job with more data than that (a trial
// replayed from the start, after a restart or for a late rule) reports
// TurnResult::more_data, and the caller queues it again behind the other
// jobs, so one large trial cannot hold a worker while others wait.
//
// Threads: a JobEvaluation is advanced by one worker at a time (the
// scheduler never runs a job on two workers at once); the fields marked
// "scheduler's lock" are read and written only under EvaluationScheduler's
// mutex. JobEvaluator itself is immutable after construction and
// thread-safe; its verdicts go to the RuleStatusRecorder (never blocking on
// the storage) and its progress to the job manager, asynchronously.

#ifndef DEBUGPLANE_RULES_ENGINE_SCHEDULING_JOB_EVALUATION_H_
#define DEBUGPLANE_RULES_ENGINE_SCHEDULING_JOB_EVALUATION_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "core/jobs/job_record.h"
#include "core/manager/training_job_manager.h"
#include "core/replication/lease_keeper.h"
#include "metrics/evaluation_metrics.h"
#include "objectstore/object_store.h"
#include "rules_engine/profiler/framework_timeline_reader.h"
#include "rules_engine/profiler/plausible_times.h"
#include "rules_engine/profiler/system_metrics_reader.h"
#include "rules_engine/profiler_rules/profiler_rules.h"
#include "rules_engine/report/profiler_report.h"
#include "rules_engine/rule/rule.h"
#include "rules_engine/rule/rule_parameters.h"
#include "rules_engine/scheduling/report_writer.h"
#include "rules_engine/scheduling/rule_status_recorder.h"
#include "rules_engine/smdebug/tensor_trial.h"
#include "rules_engine/smdebug/trial_reader.h"

namespace debugplane::rules_engine {

struct JobEvaluation {
  struct RuleRun {
    std::string configuration_name;
    std::unique_ptr<Rule> rule;
    bool done = false;
    int64_t last_step = -1;      // The last global step the rule evaluated.
    int64_t recorded_step = -1;  // The last one recorded durably (or asked to be).
    // Rules that write a report (Rule::ReportFileStem, CreateXgboostReport):
    // when it was written; stale once a step was fed since.
    ReportSchedule report_schedule = {};
  };

  // One ProfilerRuleConfiguration: its one rule, or every rule for
  // ProfilerReport.
  struct ProfilerRun {
    std::string configuration_name;
    // What the rules were made from, to make them again for a replay.
    std::string rule_to_invoke;
    RuleParameters parameters;
    std::vector<std::unique_ptr<ProfilerRule>> rules;
    bool report = false;       // ProfilerReport: also writes the report.
    bool status_done = false;  // Its terminal status is recorded (or was durable).
    ReportSchedule report_schedule;
    bool active() const { return !status_done || (report && !report_schedule.final_written); }
  };

  std::string job_name;
  int64_t record_time_us = -1;  // Scheduler's lock.
  // Why the trial cannot be read at all (reported as every rule's Error).
  std::string trial_problem;
  std::optional<objectstore::StoreLocation> trial;
  // The smdebug trial (TrialReader), the TensorBoard logs
  // (tensorboard::TensorBoardReader), or both (MergedTrial).
  std::unique_ptr<TensorTrial> reader;
  // The reader holds TensorBoard logs only: rules whose data they cannot
  // carry (core::TensorBoardGap) end in Error at the first turn.
  bool tensorboard_only = false;
  // The TensorBoard logs' location, when the job has them (watched).
  std::optional<objectstore::StoreLocation> tensorboard;
  std::vector<RuleRun> rules;
  // Profiler rules: readers of ProfilerConfig.S3OutputPath (or why it cannot
  // be read), the runs, and the data a report draws.
  std::optional<objectstore::StoreLocation> profiler;
  std::string profiler_problem;
  std::unique_ptr<SystemMetricsReader> system_reader;
  std::unique_ptr<FrameworkTimelineReader> framework_reader;
  // TensorBoardOutputConfig.S3OutputPath where readable: the framework
  // reader's second place for PyTorch traces.
  std::vector<objectstore::StoreLocation> more_trace_roots;
  // What the readers give passes through it: samples with implausible times
  // never reach a rule or the report, and the statuses count them.
  PlausibleTimes plausible_times;
  std::unique_ptr<ProfilerReportData> report_data;
  std::vector<ProfilerRun> profiler_runs;
  std::atomic<bool> cancelled{false};
  // When progress was last recorded: recording at most once per
  // progress_interval keeps a fast writer from costing a write per step.
  absl::Time progress_recorded = absl::InfinitePast();
  // The read progress last recorded for the debugging rules (the trial
  // reader's); the profiler rules' goes with their statuses.
  std::optional<v1::RuleReadProgress> trial_read_recorded;
  // Whether some active rule wants a tensor, by name: rules match names with
  // regexes, so decide once per name, again when rules finish or the
  // trial's collections change.
  std::unordered_map<std::string, bool> wanted;
  std::pair<size_t, size_t> wanted_key{SIZE_MAX, SIZE_MAX};  // (active rules, collections)

  // Scheduler's lock from here on.
  std::shared_ptr<const core::JobRecord> latest_job;  // The newest record seen.
  std::vector<ProfilerRun> pending_profiler_runs;     // Added by updates; moved in by a turn.
  std::set<std::string> profiler_run_names;           // Every run added, pending or not.
  bool has_report = false;                            // One of them is a ProfilerReport.
  // Only final reports are owed (the job was stopped, or its rules concluded
  // before the job reached its final status): turns only (re)write them,
  // with the job's status, until it is final (FinalReportsSettled).
  bool finishing = false;
  // The job's end (the job says training ended) was seen: a turn is owed.
  bool job_end_seen = false;
  bool queued = false;  // In the scheduler's ready or backlog queue.
  bool running = false;
  bool rerun = false;

  // Whether some debugging rule still evaluates. REQUIRES: the caller owns
  // the evaluation (a worker running it, or the scheduler's lock while no
  // worker does).
  bool DebugRulesActive() const;
  // Whether some profiler run is active (a status or a report still owed).
  bool ProfilerRunsActive() const;
};

struct JobEvaluatorOptions {
  // Every time read: progress throttling, ticks of time-driven rules, the
  // turn's time slice (reports: the ReportWriter's clock).
  std::shared_ptr<base::Clock> clock = base::SystemClock();
  // How often, at most, each job's rule progress (LastEvaluatedStep) is
  // recorded while steps keep coming; always at the end of training.
  absl::Duration progress_interval = absl::Seconds(1);
  // A turn reads at most this many tensor steps...
  size_t max_steps_per_turn = 256;
  // ...and stops reading once it has run this long: the reader is given the
  // deadline (TrialReader's ReadBudget), so a turn overruns it by at most
  // one index file or one step read, plus evaluating the steps of one read.
  absl::Duration turn_time_slice = absl::Milliseconds(5);
  // Steps read (then evaluated) at a time.
  size_t steps_per_read = 4;
  // With server replicas: progress is written under the job's lease fence,
  // and nothing (progress, reports) once the lease is lost. Null: one server.
  const core::LeaseKeeper* leases = nullptr;
  // Where detection latency, evaluation lag and reads are recorded; null:
  // nowhere. Must outlive the evaluator.
  metrics::EvaluationMetrics* metrics = nullptr;
};

// What a turn left.
struct TurnResult {
  // The turn stopped at its budget with data left to read: queue the job
  // again (behind the others).
  bool more_data = false;
};

// The job's end: the agent reported the command's exit (Completed, Failed)
// or the job was stopped (Stopped, once the process is gone).
bool JobSaysTrainingEnded(const core::JobRecord& job);
// Stopping or Stopped.
bool JobIsStopping(const core::JobRecord& job);

class JobEvaluator {
 public:
  // REQUIRES: `manager`, `recorder` and `reports` outlive the evaluator.
  JobEvaluator(core::TrainingJobManager* manager, RuleStatusRecorder* recorder,
               const ReportWriter* reports, JobEvaluatorOptions options);

  // One turn of `evaluation` with the job's newest record `job`: adds the
  // profiler runs `added` (replaying the profiler data when it was read
  // already), then when `finishing` only (re)writes the final reports;
  // otherwise reads what is new (bounded: see the file comment), evaluates,
  // records verdicts and progress, concludes the rules once training ended
  // and everything was read, and writes reports that are due.
  // REQUIRES: the calling thread owns `evaluation` (no other turn of it runs).
  TurnResult Turn(JobEvaluation& evaluation, const core::JobRecord& job, bool finishing,
                  std::vector<JobEvaluation::ProfilerRun> added) const;

  // Records `status` (a v1::RuleEvaluationStatus) of rule `rule` of `job`,
  // after its LastEvaluatedStep `last_evaluated_step` if >= 0 and its
  // ReadProgress `read` if given, with the details sanitized
  // (SanitizeStatusDetails). Returns at once.
  // `on_durable`, if given, runs once the status is committed (see
  // RuleStatusRecorder::Record).
  void RecordStatus(const std::string& job, const std::string& rule, int status,
                    std::string details, int64_t last_evaluated_step = -1,
                    std::optional<v1::RuleReadProgress> read = std::nullopt,
                    std::function<void()> on_durable = nullptr) const;

  // True if every report of `evaluation` was written final with the final
  // (terminal) status `job` has (or reports are not written at all).
  bool FinalReportsSettled(const JobEvaluation& evaluation, const core::JobRecord& job) const;

 private:
  // How a turn's reading of new steps ended.
  enum class StepReading {
    kCaughtUp,  // Nothing new is left (or no rule is active).
    kMoreData,  // The turn's budget is spent with data left.
    kStop,      // Cancelled, or the read failed (reported or waited for).
  };
  // What one turn read of the profiler data, for its rules.
  struct ProfilerBatch {
    std::vector<SystemMetricPoint> points;
    std::vector<FrameworkEvent> events;
    // Some active run writes a report (so everything was read, for it).
    bool for_report = false;
  };

  // The debugging rules' turn: read and evaluate new steps (within the
  // turn's budget), then tick the time-driven rules, then conclude once
  // training ended and everything was read.
  TurnResult EvaluateDebugRules(JobEvaluation& evaluation, const core::JobRecord& job) const;
  // Reads new steps in batches and feeds them to the active rules until
  // caught up or the turn's budget (turn_time_slice, max_steps_per_turn) is
  // spent; records the read metrics whichever way it ends.
  StepReading ReadAndEvaluateSteps(JobEvaluation& evaluation) const;
  void RecordReadMetrics(const JobEvaluation& evaluation, int64_t bytes_before,
                         size_t steps_read) const;
  // A failed read: waits for a store that answered before and is now
  // unavailable; otherwise every active rule ends in an Error naming it.
  void ReportReadFailure(JobEvaluation& evaluation, const absl::Status& error) const;
  // Feeds `steps` to the active rules; false if the evaluation was cancelled.
  bool FeedSteps(JobEvaluation& evaluation, const std::vector<Step>& steps,
                 absl::Time read_started) const;
  void TickDebugRules(JobEvaluation& evaluation) const;
  // OnTrainingEnd for every active rule, reported as its final status.
  void ConcludeDebugRules(JobEvaluation& evaluation) const;
  // Reports `status` with `details` for every debugging rule not done.
  // A TensorBoard-only trial: every active rule whose data TensorBoard logs
  // cannot carry ends in Error saying why (never a silent NoIssuesFound).
  void ReportTensorBoardGaps(JobEvaluation& evaluation) const;
  void ReportToActiveRules(JobEvaluation& evaluation, int status, const std::string& details) const;

  // The profiler rules' turn: read what the active rules and reports want,
  // fail the runs whose data is over a read limit, feed the rules, conclude
  // them once training ended, and write the reports that are due.
  void EvaluateProfilerRules(JobEvaluation& evaluation, const core::JobRecord& job) const;
  ProfilerBatch ReadProfilerData(JobEvaluation& evaluation) const;
  void FailRunsOverReadLimit(JobEvaluation& evaluation) const;
  void FeedProfilerData(JobEvaluation& evaluation, const ProfilerBatch& batch) const;
  // OnEnd for every rule of the active runs; each run's final status.
  void ConcludeProfilerRules(JobEvaluation& evaluation, const core::JobRecord& job) const;
  void WriteDueReports(JobEvaluation& evaluation, const core::JobRecord& job, bool ended) const;
  // Records the final `status` of profiler run `run` (and marks its report
  // stale).
  void ReportProfilerStatus(JobEvaluation& evaluation, JobEvaluation::ProfilerRun& run, int status,
                            std::string details) const;
  // Feeds `verdict` of rule `rule_index` to the record, if terminal.
  // `data_arrived`: when the step it was reached at arrived (for the
  // detection latency of IssuesFound); InfinitePast when not at a step.
  void ReportVerdict(JobEvaluation& evaluation, size_t rule_index, RuleVerdict verdict,
                     absl::Time data_arrived = absl::InfinitePast()) const;
  void Report(JobEvaluation& evaluation, size_t rule_index, int status, std::string details,
              absl::Time data_arrived = absl::InfinitePast()) const;
  // Debugging rules that write a report (job_evaluation_reports.cc): the
  // report of rule `rule_index` (final: it concluded), and the live reports
  // that are due (stale, and report_interval since the last).
  void WriteRuleReport(JobEvaluation& evaluation, size_t rule_index, bool final) const;
  void WriteDueRuleReports(JobEvaluation& evaluation) const;
  // Makes every profiler rule again and the readers read from the start.
  void ReplayProfilerRules(JobEvaluation& evaluation) const;
  void WriteReport(JobEvaluation& evaluation, size_t run_index, const core::JobRecord& job,
                   bool final) const;
  // Records the active rules' progress (last evaluated steps, read
  // progress) where it changed, at most once per progress_interval; called
  // once at the end of a turn, after its verdicts (which carry the progress
  // of the rules they conclude).
  void RecordProgress(JobEvaluation& evaluation) const;

  core::TrainingJobManager* const manager_;
  RuleStatusRecorder* const recorder_;
  const ReportWriter* const reports_;
  const JobEvaluatorOptions options_;
};

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_SCHEDULING_JOB_EVALUATION_H_
