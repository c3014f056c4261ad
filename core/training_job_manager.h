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

#ifndef DEBUGPLANE_CORE_TRAINING_JOB_MANAGER_H_
#define DEBUGPLANE_CORE_TRAINING_JOB_MANAGER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
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
  // The clock; tests may fix it.
  std::function<absl::Time()> now = [] { return absl::Now(); };
};

class TrainingJobManager final : public TrainingJobHandler {
 public:
  // Loads every job from `storage` and starts the committer thread. Work left
  // unfinished by a previous run resumes: a job that was Stopping completes
  // its stop.
  // Returns DATA_LOSS naming the job if a stored record cannot be parsed, or
  // the storage's error if reading fails.
  static absl::StatusOr<std::unique_ptr<TrainingJobManager>> Create(
      std::unique_ptr<persistence::Storage> storage, TrainingJobManagerOptions options);

  // Shuts down (see Shutdown) and releases the storage.
  ~TrainingJobManager() override;

  TrainingJobManager(const TrainingJobManager&) = delete;
  TrainingJobManager& operator=(const TrainingJobManager&) = delete;

  // Refuses new changes with UNAVAILABLE, commits every change already
  // queued (their callbacks run), ends all watch streams with UNAVAILABLE and
  // stops the committer thread. Idempotent; blocks until done.
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
  // the stop is durable, also when the job was already stopping or ended
  // (nothing changes then), NOT_FOUND for an unknown job.
  void StopTrainingJobWithReason(const std::string& job_name, std::string reason,
                                 DoneCallback done);

  // TrainingAgentService.ReportTrainingStatus: the training process started,
  // progressed or ended (Completed / Failed). `response` gets the job's
  // status; `done` OK once durable (also when nothing changes, e.g. a
  // progress report for a stopped job), INVALID_ARGUMENT for a bad request,
  // NOT_FOUND for an unknown job.
  void ReportTrainingStatus(const v1::ReportTrainingStatusRequest& request,
                            v1::ReportTrainingStatusResponse* response, DoneCallback done);

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
    // Runs on the committer thread after the change is durable (e.g. the
    // second half of a stop).
    std::function<void()> after_commit;
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
  };

  struct PendingCommit {
    std::string job_name;
    bool changed = false;
    std::shared_ptr<const JobRecord> next;
    std::shared_ptr<const std::string> encoded;  // `next` serialized, at commit.
    DoneCallback done;
    std::function<void()> after_commit;
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
  void Unwatch(const std::string& job_name, Watch* watch);
  void ScheduleCompleteStop(const std::string& job_name);

  const TrainingJobManagerOptions options_;
  std::unique_ptr<persistence::Storage> storage_;

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
};

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_TRAINING_JOB_MANAGER_H_
