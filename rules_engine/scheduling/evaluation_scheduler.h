// EvaluationScheduler: evaluates every job's built-in debugging rules on the
// job's tensor output, step by step as it lands, and its built-in profiler
// rules on the profiler output (system metrics, framework timelines) as it
// lands, and records each rule's status through the job manager (durable,
// pushed to watchers). ProfilerReport rules also (re)write their report.
//
// Work is per job, not per rule: one TrialReader per job reads each new step
// once, decoding only the tensors some rule of the job wants, and feeds it to
// all the job's rules. Jobs with new data are queued for a fixed pool of
// worker threads; a job is never on two workers at once. New data is noticed
// through a ChangeNotifier (objectstore/change_notifier.h: inotify on the
// trial's directories, milliseconds), with a slow polling pass as the
// fallback for directories that do not exist yet or stores without
// notification.
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
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/output_path.h"
#include "core/training_job_manager.h"
#include "objectstore/change_notifier.h"
#include "objectstore/local_object_store.h"
#include "objectstore/object_store.h"
#include "rules_engine/rule/rule.h"
#include "rules_engine/scheduling/custom_evaluator.h"
#include "rules_engine/scheduling/rule_status_recorder.h"
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
  // core/profiler_report_files.h); empty: reports are not written.
  std::filesystem::path report_dir;
  // How often, at most, a report is regenerated while data keeps coming.
  absl::Duration report_interval = absl::Seconds(2);
  // How rule statuses the storage refuses (a full disk) are retried until
  // durable, and by which clock.
  RuleStatusRecorderOptions status_retries;
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
  // has rules InProgress.
  void Start();

  // Stops the threads; evaluations in progress finish their current step
  // batch. Idempotent.
  void Shutdown();

  // Jobs currently evaluated (with at least one rule InProgress).
  size_t active_jobs() const;

 private:
  struct JobEvaluation;

  void OnCommit(const std::string& job_name, std::shared_ptr<const core::JobRecord> job);
  void Apply(const std::string& job_name, std::shared_ptr<const core::JobRecord> job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EnqueueLocked(const std::shared_ptr<JobEvaluation>& evaluation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WorkerLoop();
  void PollLoop();
  void Evaluate(JobEvaluation& evaluation);
  void EvaluateDebugRules(JobEvaluation& evaluation, const core::JobRecord& job);
  void EvaluateProfilerRules(JobEvaluation& evaluation, const core::JobRecord& job);
  // Makes every profiler rule of `evaluation` again and its readers read
  // from the start (after rules were added to a job whose data was read).
  // REQUIRES: the evaluation runs on this thread (a worker owns it).
  void ReplayProfilerRules(JobEvaluation& evaluation);
  // Adds the job's profiler rules that are InProgress (or a ProfilerReport
  // whose report is still live) and not evaluated yet to `evaluation`
  // (its pending list when `pending`, as a worker may own the evaluation).
  // True if it added a run.
  bool AddProfilerRunsLocked(JobEvaluation& evaluation, const core::JobRecord& job, bool pending)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the report of profiler run `run_index` (a ProfilerReport) with
  // the status of `job`; `final`: training ended, the data is complete.
  void WriteReport(JobEvaluation& evaluation, size_t run_index, const core::JobRecord& job,
                   bool final);
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
  // True if every report of `evaluation` was written final with the final
  // (terminal) status `job` has (or reports are not written at all).
  bool FinalReportsSettled(const JobEvaluation& evaluation, const core::JobRecord& job) const;
  void Report(JobEvaluation& evaluation, size_t rule_index, int status, std::string details);
  // Starts the custom evaluators of `configs` (rules of `job` InProgress
  // whose image is not built-in), once per rule and process.
  void StartCustomLocked(const core::JobRecord& job,
                         const std::vector<const v1::DebugRuleConfiguration*>& configs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records `status` (a RuleEvaluationStatus) of a rule, after its
  // LastEvaluatedStep `last_evaluated_step` if >= 0: durable and watched,
  // retried while the storage refuses it (RuleStatusRecorder). Returns at
  // once.
  void RecordStatus(const std::string& job, const std::string& rule, int status,
                    std::string details, int64_t last_evaluated_step = -1);
  // Records the rules' last evaluated steps, at most once per
  // progress_interval unless `force`.
  void RecordProgress(JobEvaluation& evaluation, bool force);
  // Adds the watches the job's trial and profiler output need now; true if
  // one is new.
  bool EnsureWatchesLocked(JobEvaluation& evaluation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropWatchesLocked(JobEvaluation& evaluation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropWatchLocked(JobEvaluation& evaluation, objectstore::ChangeNotifier::WatchId id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The notifier's listener: wakes the jobs watch `id` serves.
  void OnChange(objectstore::ChangeNotifier::WatchId id);

  core::TrainingJobManager* const manager_;
  const EvaluationSchedulerOptions options_;
  RuleStatusRecorder status_recorder_{manager_, options_.status_retries};

  mutable absl::Mutex mu_;
  // Signalled when ready_ gains work or stopping_ is set. A CondVar, not
  // Mutex::Await: absl evaluates Await conditions inside other threads'
  // Unlock, which the TSan shim for Debian's abseil cannot annotate.
  absl::CondVar work_cv_;
  absl::CondVar stop_cv_;  // Signalled when stopping_ is set.
  std::map<std::string, std::shared_ptr<JobEvaluation>> jobs_ ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<JobEvaluation>> ready_ ABSL_GUARDED_BY(mu_);
  // Evaluations that only owe final reports (JobEvaluation::finishing), by
  // job: until the job's final status is in them.
  std::map<std::string, std::vector<std::shared_ptr<JobEvaluation>>> finishing_
      ABSL_GUARDED_BY(mu_);
  // Watch -> the jobs it wakes (one directory may serve several jobs: the
  // notifier gives the same id for the same directory).
  std::map<objectstore::ChangeNotifier::WatchId, std::set<std::string>> watch_owners_
      ABSL_GUARDED_BY(mu_);
  // Custom evaluator runs by job and rule: the runner's id, 0 once finished
  // (kept so that a run is started once per process).
  std::map<std::string, std::map<std::string, uint64_t>> custom_runs_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;

  // Maps SimilarAcrossRuns' other_trials value (a job name or a path) to
  // where that trial is read.
  absl::StatusOr<objectstore::StoreLocation> ResolveOtherTrial(
      const std::string& other_trial) const;

  // The stores of the data roots: where every output path is read.
  const core::DataRootStores stores_{options_.data_roots, options_.data_root_store_options};
  // SimilarAcrossRuns' reads of other trials, shared by every job.
  OtherTrialCache other_trials_;
  const OtherTrialLookup other_trial_lookup_ = other_trials_.AsLookup(
      [this](const std::string& other_trial) { return ResolveOtherTrial(other_trial); });

  int64_t observer_id_ = 0;                               // Set by Start.
  std::unique_ptr<CustomEvaluatorRunner> custom_runner_;  // Set by Start.
  // Set by Start, reset by Shutdown (not under mu_: its listener takes mu_).
  std::unique_ptr<objectstore::ChangeNotifier> notifier_;
  std::vector<std::thread> workers_;
  std::thread poller_;
};

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_SCHEDULING_EVALUATION_SCHEDULER_H_
