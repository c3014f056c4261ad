// EvaluationScheduler: evaluates every job's built-in debugging rules on the
// job's tensor output, step by step as it lands, and its built-in profiler
// rules on the profiler output (system metrics, framework timelines) as it
// lands, and records each rule's status through the job manager (durable,
// pushed to watchers). ProfilerReport rules also (re)write their report.
//
// The scheduler composes parts with one job each:
// - TrialWatcher (trial_watcher.h): which jobs may have new data (inotify on
//   their directories, milliseconds; a polling pass by the clock as the
//   fallback for directories that do not exist yet, stores without
//   notification, and time-driven rules);
// - JobEvaluation / JobEvaluator (job_evaluation.h): one job's state and one
//   bounded turn of it (read, evaluate, record, conclude);
// - ReportWriter (report_writer.h): ProfilerReport files and their throttle;
// - rule_verdicts.h: verdict -> RuleEvaluationStatus and the details text;
// - RuleStatusRecorder: statuses until durable; CustomEvaluatorRunner:
//   custom rules' processes.
// The scheduler itself follows the job manager's commits (which jobs have
// which rules InProgress) and runs the worker pool: jobs with new data are
// queued for a fixed pool of worker threads, first in first out; a job is
// never on two workers at once, and a job whose turn ended at its budget
// with data left is queued for backlog turns, which a worker takes only
// when no job with new data waits (fairness: a replay of a large trial does
// not delay the others' new steps); optionally on backlog threads of lower
// CPU priority (options.backlog_threads).
//
// Every time read (polling, progress and report throttling, time-driven
// rules, the turn's time slice) comes from options.clock.
//
// Every read goes through the ObjectStore of the data root the job's output
// path lies in (core::DataRootStores): confined to that root, never following
// a symbolic link, whatever changed after the path was checked at
// CreateTrainingJob. A trial that became a link ends its rules in Error
// naming the link.
//
// Profiler rules read ProfilerConfig.S3OutputPath with the same workers and
// watches. IssuesFound is recorded as soon as the data shows it. A
// ProfilerReport rule's status is IssuesFound as soon as one of its rules
// finds issues, but its report keeps being regenerated (at most once per
// report_interval while data arrives, and once more at the end) until
// training ends; a final report written before the job reached its final
// status (Completed, Failed, Stopped) is written again with that status.
//
// Training ends, for both kinds of rules (they conclude then, after a last
// complete read): when the job says so (the agent reported the command's
// exit, or the job was stopped), or when the tensor trial of a single worker
// has its training_job_end.ts. With several workers (`num_workers` in the
// collections files) every worker writes that same file when it exits, so it
// ends nothing: steps still wait for every worker's files, and rules conclude
// when the job ends.
//
// Statuses are recorded through a RuleStatusRecorder: one the storage
// refuses (a full disk) is retried with backoff until durable.
//
// Restart: terminal rule statuses (and the actions they triggered) are
// durable, so a finished rule is never evaluated, and never acts, again.
// Each rule's progress (LastEvaluatedStep) is recorded as it goes, behind
// its verdicts. A rule still InProgress after a restart rebuilds its state by
// replaying the steps up to its recorded progress (rules are deterministic and
// any verdict reached there is already durable, so the replay cannot report
// anything new), then continues with the steps after it.

#ifndef DEBUGPLANE_RULES_ENGINE_SCHEDULING_EVALUATION_SCHEDULER_H_
#define DEBUGPLANE_RULES_ENGINE_SCHEDULING_EVALUATION_SCHEDULER_H_

#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "core/jobs/output_path.h"
#include "core/manager/training_job_manager.h"
#include "core/replication/lease_keeper.h"
#include "metrics/evaluation_metrics.h"
#include "metrics/object_store_metrics.h"
#include "objectstore/local_object_store.h"
#include "objectstore/object_store.h"
#include "rules_engine/rule/rule.h"
#include "rules_engine/scheduling/custom_evaluator.h"
#include "rules_engine/scheduling/job_evaluation.h"
#include "rules_engine/scheduling/report_writer.h"
#include "rules_engine/scheduling/rule_status_recorder.h"
#include "rules_engine/scheduling/trial_watcher.h"
#include "rules_engine/tensor_rules/other_trial_lookup.h"

namespace debugplane::rules_engine {

struct EvaluationSchedulerOptions {
  // Threads that read trials and evaluate rules.
  int worker_threads = 2;
  // How often every active job is checked for new data regardless of
  // inotify (the fallback path), and directories of stores without change
  // notification are listed again.
  absl::Duration poll_interval = absl::Seconds(1);
  // Where local output paths may point (the server's --data-root): one
  // confined store is opened for each, with these options (tests choose the
  // component walk instead of openat2).
  std::vector<std::filesystem::path> data_roots;
  objectstore::LocalObjectStore::Options data_root_store_options;
  // The stores of s3:// output paths, one per bucket (core/jobs/output_path.h);
  // null: such paths end their rules in Error saying the server is not
  // configured to read object storage.
  core::DataRootStores::BucketStoreFactory bucket_stores;
  // Custom rule evaluators: RuleEvaluatorImage -> the command (absolute
  // executable path, then arguments) that evaluates such a rule. A rule whose
  // image is not here ends in Error.
  std::map<std::string, std::vector<std::string>> custom_evaluators;
  // Evaluator processes running at once (more wait) and each one's limit.
  int custom_evaluator_concurrency = 16;
  absl::Duration custom_evaluator_time_limit = absl::Hours(24);
  // How often, at most, each job's rule progress (LastEvaluatedStep) is
  // recorded while steps keep coming; always at the end of training.
  absl::Duration progress_interval = absl::Seconds(1);
  // Where ProfilerReport rules write their reports (see
  // core/handlers/profiler_report_files.h); empty: reports are not written.
  std::filesystem::path report_dir;
  // The database's copy of the reports, which every replica serves (null:
  // the files alone). Must outlive the scheduler.
  persistence::ReportStore* report_store = nullptr;
  // How often, at most, a report is regenerated while data keeps coming.
  absl::Duration report_interval = absl::Seconds(2);
  // How rule statuses the storage refuses (a full disk) are retried until
  // durable, and by which clock.
  RuleStatusRecorderOptions status_retries;
  // The clock of every other time read (a FakeClock in tests).
  std::shared_ptr<base::Clock> clock = base::SystemClock();
  // Fairness: one turn of a job on a worker reads at most this many steps,
  // and stops reading after this much time, then the job queues again
  // behind the others.
  size_t max_steps_per_turn = 256;
  absl::Duration turn_time_slice = absl::Milliseconds(5);
  // Catch-up: a job whose turn stopped at that budget with data left (a
  // backlog: a trial replayed from the start) goes on in turns on the
  // workers, taken only when no job with new data waits (0, the default);
  // or on this many backlog threads of their own (-1: as many as
  // worker_threads), which run at the lower CPU priority backlog_nice
  // (0-19) so that the workers take the cores from them at once. Not the
  // default: on a machine saturated by other processes of nice 0, a
  // backlog thread gets almost no CPU, and so its jobs almost no progress.
  int backlog_threads = 0;
  int backlog_nice = 10;
  // Server replicas sharing one database: this replica evaluates only the
  // jobs whose lease it holds (it starts a job when it acquires the lease,
  // resuming from the recorded progress as after a restart, and drops the
  // job at once when it loses it), and every write it makes for a job
  // carries the lease's fence. Null: every job (one server). Not owned; it
  // must outlive the scheduler and be started after Start() and shut down
  // before the scheduler (its listeners call the scheduler).
  core::LeaseKeeper* leases = nullptr;
  // Where evaluation (detection latency, lag, reads) and object store
  // requests are recorded; null: nowhere. Must outlive the scheduler.
  metrics::EvaluationMetrics* evaluation_metrics = nullptr;
  metrics::ObjectStoreMetrics* object_store_metrics = nullptr;
  // Optional: called after every turn of a job that read new data (tensor
  // steps, system metrics or framework events), with the job and the last
  // global step of its trial (-1 if none was read yet), on the worker
  // thread: it must be quick and must not block (the dashboard records it
  // and wakes its own thread, which throttles what it sends).
  std::function<void(const std::string& job_name, int64_t last_step)> on_data_read;
};

class EvaluationScheduler {
 public:
  // REQUIRES: `manager` outlives the scheduler.
  EvaluationScheduler(core::TrainingJobManager* manager, EvaluationSchedulerOptions options);
  // Shuts down.
  ~EvaluationScheduler();

  EvaluationScheduler(const EvaluationScheduler&) = delete;
  EvaluationScheduler& operator=(const EvaluationScheduler&) = delete;

  // Subscribes to the manager's commits and starts evaluating every job that
  // has rules InProgress (in the order the manager lists them).
  void Start();

  // Stops the threads; evaluations in progress finish their current turn.
  // Idempotent.
  void Shutdown();

  // Jobs currently evaluated (with at least one rule InProgress).
  size_t active_jobs() const;

  // The leases' listeners (options.leases): starts evaluating a job whose
  // lease this replica acquired, from its committed record; stops one whose
  // lease it lost (its turn in progress, if any, writes nothing more: the
  // writes check the lease).
  void OnLeaseAcquired(const std::string& job_name);
  void OnLeaseLost(const std::string& job_name);

 private:
  void OnCommit(const std::string& job_name, std::shared_ptr<const core::JobRecord> job);
  void Apply(const std::string& job_name, std::shared_ptr<const core::JobRecord> job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The rules of one job whose evaluation concluded here (concluded_rules_),
  // debugging and profiler rules apart (their names may coincide).
  struct ConcludedRules {
    std::set<std::string> debug;
    std::set<std::string> profiler;
    bool empty() const { return debug.empty() && profiler.empty(); }
  };
  // Whether debugging rule (profiler rule when `profiler`) `rule_name` of the
  // job concluded here (concluded_rules_).
  bool ConcludedHereLocked(const std::string& job_name, const std::string& rule_name,
                           bool profiler) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops from concluded_rules_ what `job` (null: deleted) shows terminal,
  // and all of a deleted or stopping job.
  void ForgetRecordedVerdictsLocked(const std::string& job_name, const core::JobRecord* job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes the evaluation of a job not evaluated yet; nullptr if it has no
  // rule to evaluate here (errors and custom rules are started/recorded).
  std::shared_ptr<JobEvaluation> NewEvaluationLocked(
      const std::string& job_name, const std::shared_ptr<const core::JobRecord>& job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues `evaluation` at the back (or marks it for a rerun when a worker
  // runs it now).
  void EnqueueLocked(const std::shared_ptr<JobEvaluation>& evaluation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues `evaluation`, whose turn stopped at its budget, at the back of
  // backlog_. REQUIRES: not running, not queued.
  void EnqueueBacklogLocked(const std::shared_ptr<JobEvaluation>& evaluation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A worker: takes jobs from ready_ (then backlog_ when there are no
  // backlog threads); a backlog thread (`backlog`) from backlog_ only.
  void WorkerLoop(bool backlog);
  // One turn of `evaluation` on this worker.
  // REQUIRES: this worker took it from ready_ (running is set).
  TurnResult RunTurn(JobEvaluation& evaluation);
  // After a turn: drops a concluded evaluation, or queues it again.
  void AfterTurnLocked(const std::shared_ptr<JobEvaluation>& evaluation, const TurnResult& turn)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds the job's profiler rules that are InProgress (or a ProfilerReport
  // whose report is still live) and not evaluated yet to `evaluation`
  // (its pending list when `pending`, as a worker may own the evaluation).
  // True if it added a run.
  bool AddProfilerRunsLocked(JobEvaluation& evaluation, const core::JobRecord& job, bool pending)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets the evaluation's tensor trial and its reader from the job's
  // DebugHookConfig, or its trial_problem saying why there is none.
  void OpenTrial(JobEvaluation& evaluation, const core::JobRecord& job);
  // Sets the evaluation's profiler location from the job's ProfilerConfig,
  // or its profiler_problem saying why it cannot be read.
  void OpenProfilerData(JobEvaluation& evaluation, const core::JobRecord& job);
  // Moves `evaluation` (out of jobs_) to finishing_: it only owes its final
  // reports, written again when the job reaches its final status.
  void StartFinishingLocked(const std::shared_ptr<JobEvaluation>& evaluation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StopFinishingLocked(const std::shared_ptr<JobEvaluation>& evaluation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands a new record of `job_name` (nullptr: deleted) to its finishing
  // evaluations; enqueues them when the job's status is final.
  void FollowFinishingLocked(const std::string& job_name,
                             const std::shared_ptr<const core::JobRecord>& job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts the custom evaluators of `configs` (rules of `job` InProgress
  // whose image is not built-in), once per rule and process.
  void StartCustomLocked(const core::JobRecord& job,
                         const std::vector<const v1::DebugRuleConfiguration*>& configs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Watches what `evaluation` still reads; true if a watch is new.
  bool UpdateWatchesLocked(const JobEvaluation& evaluation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The watcher's listeners.
  void OnChange(const std::string& job_name);
  void OnPoll();

  // `options` with the lease keeper handed to the parts that write.
  static EvaluationSchedulerOptions WithLeases(EvaluationSchedulerOptions options);

  core::TrainingJobManager* const manager_;
  const EvaluationSchedulerOptions options_;
  RuleStatusRecorder status_recorder_{manager_, options_.status_retries};
  const ReportWriter report_writer_{ReportWriterOptions{.report_dir = options_.report_dir,
                                                        .report_interval = options_.report_interval,
                                                        .clock = options_.clock,
                                                        .store = options_.report_store}};
  const JobEvaluator evaluator_{manager_, &status_recorder_, &report_writer_,
                                JobEvaluatorOptions{
                                    .clock = options_.clock,
                                    .progress_interval = options_.progress_interval,
                                    .max_steps_per_turn = options_.max_steps_per_turn,
                                    .turn_time_slice = options_.turn_time_slice,
                                    .leases = options_.leases,
                                    .metrics = options_.evaluation_metrics,
                                }};

  mutable absl::Mutex mu_;
  // Signalled when ready_ gains work or stopping_ is set.
  absl::CondVar work_cv_;
  // Signalled when backlog_ gains work (with backlog threads) or stopping_.
  absl::CondVar backlog_cv_;
  std::map<std::string, std::shared_ptr<JobEvaluation>> jobs_ ABSL_GUARDED_BY(mu_);
  // Jobs with new data (or owed a pass), first in first out.
  std::deque<std::shared_ptr<JobEvaluation>> ready_ ABSL_GUARDED_BY(mu_);
  // Jobs whose last turn stopped at its budget, first in first out. A job is
  // in at most one of the two queues (JobEvaluation::queued).
  std::deque<std::shared_ptr<JobEvaluation>> backlog_ ABSL_GUARDED_BY(mu_);
  // Evaluations that only owe final reports (JobEvaluation::finishing), by
  // job: until the job's final status is in them.
  std::map<std::string, std::vector<std::shared_ptr<JobEvaluation>>> finishing_
      ABSL_GUARDED_BY(mu_);
  // Custom evaluator runs by job and rule: the runner's id, 0 once finished
  // (kept so that a run is started once per process).
  std::map<std::string, std::map<std::string, uint64_t>> custom_runs_ ABSL_GUARDED_BY(mu_);
  // The rules whose evaluation concluded here, by job, until a commit shows
  // their verdicts: the commits before it (the rule's progress, written
  // ahead of its verdict, or another rule's verdict) still say InProgress,
  // and must not start the rule again: a debugging rule from its first step
  // (a second read of the whole trial), a ProfilerReport anew (a non-final
  // report over the final one). Dropped when the job is deleted or stopped,
  // or its lease is lost.
  std::map<std::string, ConcludedRules> concluded_rules_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;

  // Maps SimilarAcrossRuns' other_trials value (a job name or a path) to
  // where that trial is read.
  absl::StatusOr<objectstore::StoreLocation> ResolveOtherTrial(
      const std::string& other_trial) const;

  // The stores of the data roots: where every output path is read.
  const core::DataRootStores stores_{options_.data_roots, options_.data_root_store_options,
                                     options_.bucket_stores, options_.object_store_metrics};
  // SimilarAcrossRuns' reads of other trials, shared by every job.
  OtherTrialCache other_trials_;
  const OtherTrialLookup other_trial_lookup_ = other_trials_.AsLookup(
      [this](const std::string& other_trial) { return ResolveOtherTrial(other_trial); });

  int64_t observer_id_ = 0;                               // Set by Start.
  std::unique_ptr<CustomEvaluatorRunner> custom_runner_;  // Set by Start.
  // Set by Start, shut down (not reset) by Shutdown outside mu_: its
  // listeners take mu_.
  std::unique_ptr<TrialWatcher> watcher_;
  std::vector<std::thread> workers_;  // Backlog threads included.
  int backlog_threads_ = 0;           // Set by Start.
};

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_SCHEDULING_EVALUATION_SCHEDULER_H_
