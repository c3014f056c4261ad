// TrainingJobManager: the authority over training jobs.
//
// It serves reads from memory and makes every change durable before it is
// acknowledged. Changes are computed on the caller's thread against the
// latest (possibly not yet durable) state of a job, queued in order, and
// written by one committer thread that groups everything queued into a single
// storage transaction (group commit: one fsync for many calls). Readers and
// watchers only ever see committed state.
//
// If a storage write fails, the changes in that group and every change queued
// behind it (which may build on them) fail with UNAVAILABLE and the latest
// state rolls back to the committed one: nothing acknowledged is lost and
// nothing unacknowledged becomes visible.
//
// Stopped means the training process is gone. A stop (StopTrainingJob, a
// rule's StopTraining action, MaxRuntimeInSeconds) makes the job Stopping;
// the agents connected to it (ConnectAgent) kill the training command and
// report its exit (ReportTrainingStatus EVENT_STOPPED), which makes it
// Stopped. Without that report the job is Stopped when the wait of
// TrainingJobManagerOptions::stop_wait ends (PlanStopCompletion). Those
// waits and MaxRuntimeInSeconds are deadlines by the options' clock, kept
// by a DeadlineTimer and recomputed from the durable records at start-up
// (a deadline that passed while the server was down fires at once); they
// change jobs through the same queue as every call.

#ifndef DEBUGPLANE_CORE_TRAINING_JOB_MANAGER_H_
#define DEBUGPLANE_CORE_TRAINING_JOB_MANAGER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "core/deadline_timer.h"
#include "core/job_record.h"
#include "core/training_job_handler.h"
#include "core/validation.h"
#include "debugplane/v1/training_agent.pb.h"
#include "persistence/storage.h"

namespace debugplane::core {

struct TrainingJobManagerOptions {
  ValidationOptions validation;
  ArnScope arn_scope;
  // Upper bound of job writes grouped into one storage transaction.
  int max_commit_group = 1024;
  // The clock of every timestamp and deadline; tests use a FakeClock.
  std::shared_ptr<Clock> clock = SystemClock();
  // How long a Stopping job waits for the training process to be reported
  // gone (see StopWaitLimits).
  StopWaitLimits stop_wait;
};

class TrainingJobManager final : public TrainingJobHandler {
 public:
  // Loads every job from `storage` and starts the committer and deadline
  // threads. Work left unfinished by a previous run resumes: a job that was
  // Stopping waits again for its agent (bounded as above, the wait for an
  // agent to reconnect counted from now), an InProgress job's
  // MaxRuntimeInSeconds is enforced (at once if it passed meanwhile).
  // Returns DATA_LOSS naming the job if a stored record cannot be parsed, or
  // the storage's error if reading fails.
  static absl::StatusOr<std::unique_ptr<TrainingJobManager>> Create(
      std::unique_ptr<persistence::Storage> storage, TrainingJobManagerOptions options);

  // Shuts down (see Shutdown) and releases the storage.
  ~TrainingJobManager() override;

  TrainingJobManager(const TrainingJobManager&) = delete;
  TrainingJobManager& operator=(const TrainingJobManager&) = delete;

  // Refuses new changes with UNAVAILABLE, stops the deadline thread, commits
  // every change already queued (their callbacks run), ends all watch streams
  // with UNAVAILABLE and stops the committer thread. Idempotent; blocks until
  // done.
  void Shutdown();

  // TrainingJobHandler. Create, Update, Stop and Delete complete on the
  // committer thread once durable; Describe and List complete inline.
  void CreateTrainingJob(const v1::CreateTrainingJobRequest& request,
                         v1::CreateTrainingJobResponse* response, DoneCallback done) override;
  void DescribeTrainingJob(const v1::DescribeTrainingJobRequest& request,
                           v1::DescribeTrainingJobResponse* response, DoneCallback done) override;
  void ListTrainingJobs(const v1::ListTrainingJobsRequest& request,
                        v1::ListTrainingJobsResponse* response, DoneCallback done) override;
  void UpdateTrainingJob(const v1::UpdateTrainingJobRequest& request,
                         v1::UpdateTrainingJobResponse* response, DoneCallback done) override;
  void StopTrainingJob(const v1::StopTrainingJobRequest& request,
                       v1::StopTrainingJobResponse* response, DoneCallback done) override;
  void DeleteTrainingJob(const v1::DeleteTrainingJobRequest& request,
                         v1::DeleteTrainingJobResponse* response, DoneCallback done) override;
  absl::StatusOr<std::unique_ptr<WatchRegistration>> WatchTrainingJob(
      const v1::WatchTrainingJobRequest& request, JobWatcher* watcher) override;
  absl::StatusOr<std::shared_ptr<const std::string>> DescribeTrainingJobEncoded(
      const v1::DescribeTrainingJobRequest& request) override;

  // Sets the status of one rule evaluation of a job (for the rules engine).
  // `done` gets OK once durable (also when nothing changed), NOT_FOUND for an
  // unknown job or rule, FAILED_PRECONDITION if the rule is already terminal
  // with another status.
  void SetRuleEvaluationStatus(const std::string& job_name, const std::string& rule_name,
                               RuleStatus status, std::string details, DoneCallback done);

  // Records that the rules of a job evaluated every step up to the given
  // global steps ((rule configuration name, step) pairs), for resuming after
  // a restart. Rules that are terminal or unknown are left as they are. Not a
  // status change: no watch event. `done` gets OK once durable, NOT_FOUND for
  // an unknown job.
  void RecordRuleProgress(const std::string& job_name,
                          std::vector<std::pair<std::string, int64_t>> progress, DoneCallback done);

  // Sets the status of rule action `action_id` of a job (for the action
  // dispatcher): Pending with more attempts while retrying, then Succeeded,
  // Failed or Skipped. `done` gets OK once durable (also when nothing
  // changed), NOT_FOUND for an unknown job or action, FAILED_PRECONDITION if
  // the action is no longer Pending.
  void SetRuleActionStatus(const std::string& job_name, const std::string& action_id,
                           v1::RuleActionStatus::Value status, std::string details, int attempts,
                           DoneCallback done);

  // StopTrainingJob on behalf of a rule action: as StopTrainingJob, with
  // `reason` as the Stopping transition's StatusMessage. `done` gets OK once
  // the Stopping state is durable (Stopped follows as for every stop), also
  // when the job was already stopping or ended (nothing changes then),
  // NOT_FOUND for an unknown job.
  void StopTrainingJobWithReason(const std::string& job_name, std::string reason,
                                 DoneCallback done);

  // TrainingAgentService.ReportTrainingStatus: the training process started,
  // progressed, ended on its own (Completed / Failed), or exited after a
  // stop order (EVENT_STOPPED: the Stopping job becomes Stopped with the
  // report's StatusMessage). A start is refused while the job is Stopping:
  // the response then says Stopping and the agent must not start the
  // command. An end reported while Stopping completes the stop. `response`
  // gets the job's status; `done` OK once durable (also when nothing
  // changes, e.g. a progress report for a stopped job), INVALID_ARGUMENT for
  // a bad request, NOT_FOUND for an unknown job, FAILED_PRECONDITION for
  // EVENT_STOPPED while the job is InProgress (no stop was ordered).
  void ReportTrainingStatus(const v1::ReportTrainingStatusRequest& request,
                            v1::ReportTrainingStatusResponse* response, DoneCallback done);

  // As WatchTrainingJob, for the ConnectAgent stream of an agent: while the
  // registration lives an agent is connected to the job, which is what a
  // stop of the job waits for (see StopWaitLimits).
  absl::StatusOr<std::unique_ptr<WatchRegistration>> WatchAsAgent(const std::string& job_name,
                                                                  JobWatcher* watcher);

  // The job's pending deadline (MaxRuntimeInSeconds while InProgress, the
  // end of the stop's wait while Stopping), if any. For diagnostics and
  // tests.
  std::optional<absl::Time> PendingDeadline(const std::string& job_name) const;

  // Names of the committed InProgress jobs whose name starts with `prefix`,
  // in name order (for the StopTraining action's training_job_prefix).
  std::vector<std::string> ActiveJobNamesWithPrefix(const std::string& prefix) const;

  // Called after every committed change of a job with its new record
  // (nullptr once deleted), in commit order, on the committer thread and
  // outside the manager's lock. It must not block (hand work to a pool); it
  // may call the manager, but not Add/RemoveCommitObserver.
  using CommitObserver =
      std::function<void(const std::string& job_name, std::shared_ptr<const JobRecord> job)>;
  struct Observation {
    int64_t id = 0;  // For RemoveCommitObserver.
    // The committed jobs when the observer was added: every later change
    // reaches the observer (a change may also be in this snapshot).
    std::vector<std::shared_ptr<const JobRecord>> jobs;
  };
  // Adds an observer of committed changes. Thread-safe.
  Observation AddCommitObserver(CommitObserver observer);
  // Removes the observer; when it returns, the observer is not running and
  // will not be called again. Unknown ids are ignored.
  // REQUIRES: not called from inside a commit observer.
  void RemoveCommitObserver(int64_t id);

  // The committed record of a job, or nullptr. Thread-safe; the snapshot is
  // immutable.
  std::shared_ptr<const JobRecord> GetJob(const std::string& name) const;

  // Number of committed jobs.
  size_t job_count() const;

  const TrainingJobManagerOptions& options() const { return options_; }

 private:
  // What a mutation decided.
  struct Change {
    // The new latest state; nullptr deletes the job.
    std::shared_ptr<const JobRecord> next;
    // False when the mutation left the job as it was: nothing is written, but
    // `done` still waits until everything queued before it is durable.
    bool changed = true;
  };
  // Computes a change from the latest state (nullptr if there is none).
  // Runs under mu_: must be quick and must not call back into the manager.
  using Mutation = std::function<absl::StatusOr<Change>(const JobRecord* latest)>;

  struct Watch;
  class Registration;

  struct JobEntry {
    std::shared_ptr<const JobRecord> committed;  // What readers see.
    // `committed` serialized: written to storage, and served by Describe
    // without copying or encoding the record again.
    std::shared_ptr<const std::string> committed_encoded;
    std::shared_ptr<const JobRecord> latest;  // Committed + queued changes.
    int queued_changes = 0;
    std::vector<Watch*> watches;
    // The agents' watches (also in `watches` until the job is settled), and
    // when the last one went away (InfinitePast: none since the start).
    std::vector<Watch*> agents;
    absl::Time agents_absent_since = absl::InfinitePast();
  };

  struct PendingCommit {
    std::string job_name;
    bool changed = false;
    std::shared_ptr<const JobRecord> next;
    std::shared_ptr<const std::string> encoded;  // `next` serialized, at commit.
    DoneCallback done;
  };

  TrainingJobManager(std::unique_ptr<persistence::Storage> storage,
                     TrainingJobManagerOptions options);

  absl::Status Load();
  void Mutate(const std::string& job_name, const Mutation& mutation, DoneCallback done);
  void CommitLoop();
  // Publishes committed changes: updates indexes and notifies watchers.
  void PublishLocked(PendingCommit& commit, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RollBackLocked(const std::string& job_name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void IndexLocked(const std::string& name, const JobRecord* before, const JobRecord* after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::unique_ptr<WatchRegistration>> RegisterWatch(const std::string& job_name,
                                                                   JobWatcher* watcher, bool agent);
  void Unwatch(const std::string& job_name, Watch* watch);
  absl::Time Now() const { return options_.clock->Now(); }
  AgentPresence PresenceLocked(const JobEntry& entry) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets (or cancels) the job's deadline from its committed record.
  void ArmDeadlineLocked(const std::string& job_name, const JobEntry& entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A deadline passed (on the deadline thread): enforces MaxRuntimeInSeconds
  // or ends a stop's wait, as the job's latest state then calls for.
  void OnDeadline(const std::string& job_name);

  const TrainingJobManagerOptions options_;
  std::unique_ptr<persistence::Storage> storage_;
  // When this manager started: waits for agents to reconnect count from it.
  const absl::Time started_at_;

  mutable absl::Mutex mu_;
  absl::CondVar queue_cv_;
  std::map<std::string, JobEntry> jobs_ ABSL_GUARDED_BY(mu_);
  // Committed jobs by (creation time in microseconds, name), for listing.
  std::set<std::pair<int64_t, std::string>> by_creation_ ABSL_GUARDED_BY(mu_);
  size_t committed_count_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<PendingCommit> queue_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  bool committer_done_ ABSL_GUARDED_BY(mu_) = false;

  // Observers are called with observers_mu_ held (shared), outside mu_, so
  // that RemoveCommitObserver can wait for calls in flight. Never held
  // together with mu_.
  mutable absl::Mutex observers_mu_;
  std::map<int64_t, CommitObserver> observers_ ABSL_GUARDED_BY(observers_mu_);
  int64_t next_observer_id_ ABSL_GUARDED_BY(observers_mu_) = 1;

  std::thread committer_;
  // Created once the jobs are loaded; calls OnDeadline, which takes mu_, so
  // it is shut down without mu_ held.
  std::unique_ptr<DeadlineTimer> deadlines_;
};

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_TRAINING_JOB_MANAGER_H_
