// TrainingJobManager: the authority over training jobs.
//
// It serves reads from memory and makes every change durable before it is
// acknowledged. Changes are computed (on the caller's thread; Create and
// Update on the validation pool) against the latest (possibly not yet
// durable) state of a job, queued in order, and written by one committer
// thread that groups everything queued into a single storage transaction
// (group commit: one fsync for many calls; see
// TrainingJobManagerOptions::max_group_wait). Readers and watchers only ever
// see committed state.
//
// If a storage write fails, the changes in that group and every change queued
// behind it (which may build on them) fail with UNAVAILABLE and the latest
// state rolls back to the committed one: nothing acknowledged is lost and
// nothing unacknowledged becomes visible.
//
// Threads. No caller's thread waits for the file system or for a watcher:
//   - CreateTrainingJob and UpdateTrainingJob are validated on a small pool
//     (TrainingJobManagerOptions::validation_threads), since checking output
//     paths reads the file system (core/jobs/output_path.h); the change is queued
//     from there. Describe, List and the other calls complete inline or on
//     the committer.
//   - Watchers are told of commits on a delivery pool, never under the
//     manager's lock and never on the committer: the committer only queues
//     each commit's news on every watch of the job (in commit order) and
//     goes on with the next group. Each watch is drained by one thread at a
//     time, so its callbacks are serialized and in commit order; a watcher
//     that blocks holds up its own deliveries (and a delivery thread), not
//     reads, other jobs or the committer.
//   - The `done` of a change to a job that has watchers runs once every
//     watcher has been told of it (on a delivery thread): an acknowledged
//     change has reached the job's watchers, as an agent waiting for a stop
//     order relies on.
//   - Registering a watch delivers the current state on the registering
//     thread (outside the lock): JobWatcher callbacks must not block, and
//     the gRPC watchers only queue a write (StreamWriter::Push), so a gRPC
//     callback thread does no waiting there, and the state is there when
//     WatchTrainingJob/WatchAsAgent returns. Later commits are delivered by
//     the pool.
//
// Stopped means the training process is gone. A stop (StopTrainingJob, a
// rule's StopTraining action, MaxRuntimeInSeconds) makes the job Stopping;
// the agents connected to it (ConnectAgent) kill the training command and
// report its exit (ReportTrainingStatus EVENT_STOPPED), which makes it
// Stopped. Without that report the job is Stopped when the wait of
// TrainingJobManagerOptions::stop_wait ends (PlanStopCompletion). Those
// waits and MaxRuntimeInSeconds are deadlines by the options' clock, kept
// by a base::DeadlineTimer and recomputed from the durable records at start-up
// (a deadline that passed while the server was down fires at once); they
// change jobs through the same queue as every call.
//
// Parts. The manager is the façade that wires three parts, each behind a
// narrow seam: the job mutations (core/jobs/job_mutations.h: pure functions
// from a job's latest record and a request to its next record), the
// GroupCommitter (core/manager/group_committer.h: the queue, the commit
// thread, the batches; it reaches the jobs through a CommitTarget) and the
// WatchHub (core/manager/watch_hub.h: each watch's queue and its delivery).
// The manager keeps the jobs (committed and latest states, indexes, each
// job's watches and agents) under its lock, the deadlines and the feed.
//
// Replicas (TrainingJobManagerOptions::follow_changes): several servers on
// one PostgreSQL database are one control plane. Each manager's writes carry
// the row version they were computed against; a write that another server
// overtook fails in storage (ABORTED): the manager then reads the change
// feed up to date and re-runs the call's mutation on the new state (up to
// max_conflict_retries times, then the call fails with ABORTED naming the
// job). Every manager follows the storage's change feed (woken by
// LISTEN/NOTIFY, and polling as a safety net): the other servers' changes
// are applied in sequence order, once each, as its own commits are
// (indexes, deadlines, watchers, commit observers), and its own are
// skipped. Reads (Describe, List, Watch) first catch up with the feed
// (AwaitCaughtUp: one query that finds nothing new when up to date, shared
// by the reads waiting at the time), so a client that wrote through one
// server reads its write through any other. Deadlines fire on every server;
// the version check lets one of them apply each (the others' re-runs find
// nothing to do). Agents connected to any server count for stop waits: each
// manager records its agents per job in the storage (agent presence, with
// a heartbeat) and reads the others' when a stop's wait ends.

#ifndef DEBUGPLANE_CORE_MANAGER_TRAINING_JOB_MANAGER_H_
#define DEBUGPLANE_CORE_MANAGER_TRAINING_JOB_MANAGER_H_

#include <cstdint>
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
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/deadline_timer.h"
#include "base/thread_pool.h"
#include "core/jobs/job_record.h"
#include "core/jobs/validation.h"
#include "core/manager/group_committer.h"
#include "core/manager/training_job_handler.h"
#include "core/manager/training_job_manager_options.h"
#include "core/manager/watch_hub.h"
#include "debugplane/v1/training_agent.pb.h"
#include "persistence/storage.h"

namespace debugplane::core {

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

  // Shuts down (see Shutdown) and releases the storage. Watch registrations
  // may outlive the manager: destroying them afterwards does nothing.
  ~TrainingJobManager() override;

  TrainingJobManager(const TrainingJobManager&) = delete;
  TrainingJobManager& operator=(const TrainingJobManager&) = delete;

  // Refuses new changes with UNAVAILABLE (also Creates and Updates still
  // waiting for validation), stops the deadline thread, commits every change
  // already queued (their callbacks run), stops the committer thread, ends
  // all watch streams with UNAVAILABLE and waits until every delivery is
  // done. Idempotent; blocks until done.
  // REQUIRES: not called from a JobWatcher or DoneCallback of this manager.
  void Shutdown();

  // TrainingJobHandler, the changes validated on the validation pool (their
  // output paths are checked against the file system). They complete once
  // durable, on the committer thread, or on a delivery thread once the
  // job's watchers have the change.
  void CreateTrainingJob(const v1::CreateTrainingJobRequest& request,
                         v1::CreateTrainingJobResponse* response, DoneCallback done) override;
  void UpdateTrainingJob(const v1::UpdateTrainingJobRequest& request,
                         v1::UpdateTrainingJobResponse* response, DoneCallback done) override;
  // The reads: from the committed state, inline (once caught up with the
  // feed, for replicas). WatchTrainingJob delivers the current state before
  // it returns (see the threads above).
  absl::StatusOr<std::unique_ptr<WatchRegistration>> WatchTrainingJob(
      const v1::WatchTrainingJobRequest& request, JobWatcher* watcher) override;
  void DescribeTrainingJob(const v1::DescribeTrainingJobRequest& request,
                           v1::DescribeTrainingJobResponse* response, DoneCallback done) override;
  void ListTrainingJobs(const v1::ListTrainingJobsRequest& request,
                        v1::ListTrainingJobsResponse* response, DoneCallback done) override;
  absl::StatusOr<std::shared_ptr<const std::string>> DescribeTrainingJobEncoded(
      const v1::DescribeTrainingJobRequest& request) override;
  // The other changes, computed on the caller's thread; they complete as
  // Create and Update do.
  void StopTrainingJob(const v1::StopTrainingJobRequest& request,
                       v1::StopTrainingJobResponse* response, DoneCallback done) override;
  void DeleteTrainingJob(const v1::DeleteTrainingJobRequest& request,
                         v1::DeleteTrainingJobResponse* response, DoneCallback done) override;
  // AwaitCaughtUp.
  void AwaitConsistentRead(DoneCallback done) override { AwaitCaughtUp(std::move(done)); }

  // Sets the status of one rule evaluation of a job (for the rules engine).
  // `done` gets OK once durable (also when nothing changed), NOT_FOUND for an
  // unknown job or rule, FAILED_PRECONDITION if the rule is already terminal
  // with another status.
  //
  // Fencing (this and the next three calls, for the rules engine when server
  // replicas share the database, see core/replication/lease_keeper.h):
  // with a `fence` the change is written only if the database still gives
  // that lease to that owner and token, checked in the write's transaction.
  // A stale fence fails `done` with FAILED_PRECONDITION naming the job and
  // the tokens; the job rolls back to its committed state, and the changes
  // of the same job queued behind fail with UNAVAILABLE; other jobs' changes
  // in the same group are written without it.
  void SetRuleEvaluationStatus(const std::string& job_name, const std::string& rule_name,
                               RuleStatus status, std::string details, DoneCallback done,
                               std::optional<persistence::CheckLease> fence = std::nullopt);

  // Records the progress of rules of a job: that they evaluated every step
  // up to the given global steps (LastEvaluatedStep, for resuming after a
  // restart) and how far their readers read (ReadProgress). Rules that are
  // terminal or unknown are left as they are (SetRuleProgress). Not a status
  // change: no watch event. `done` gets OK once durable, NOT_FOUND for an
  // unknown job.
  void RecordRuleProgress(const std::string& job_name, std::vector<RuleProgress> progress,
                          DoneCallback done,
                          std::optional<persistence::CheckLease> fence = std::nullopt);

  // Sets the status of rule action `action_id` of a job (for the action
  // dispatcher): Pending with more attempts while retrying, then Succeeded,
  // Failed or Skipped. `done` gets OK once durable (also when nothing
  // changed), NOT_FOUND for an unknown job or action, FAILED_PRECONDITION if
  // the action is no longer Pending.
  void SetRuleActionStatus(const std::string& job_name, const std::string& action_id,
                           v1::RuleActionStatus::Value status, std::string details, int attempts,
                           DoneCallback done,
                           std::optional<persistence::CheckLease> fence = std::nullopt);

  // StopTrainingJob on behalf of a rule action: as StopTrainingJob, with
  // `reason` as the Stopping transition's StatusMessage. `done` gets OK once
  // the Stopping state is durable (Stopped follows as for every stop), also
  // when the job was already stopping or ended (nothing changes then),
  // NOT_FOUND for an unknown job.
  void StopTrainingJobWithReason(const std::string& job_name, std::string reason, DoneCallback done,
                                 std::optional<persistence::CheckLease> fence = std::nullopt);

  // TrainingAgentService.ReportTrainingStatus: the training process started,
  // progressed, ended on its own (Completed / Failed), or exited after a
  // stop order (EVENT_STOPPED: the Stopping job becomes Stopped with the
  // report's StatusMessage), or the agent wrote a configuration version
  // (EVENT_CONFIG_APPLIED: ProfilerConfigAppliedTime / Version, see
  // RecordProfilerConfigApplied). A start is refused while the job is Stopping:
  // the response then says Stopping and the agent must not start the
  // command. An end reported while Stopping completes the stop. `response`
  // gets the job's status; `done` OK once durable (also when nothing
  // changes, e.g. a progress report for a stopped job), INVALID_ARGUMENT
  // naming the field for a bad request (no Event, EVENT_PROGRESS without
  // CurrentStep, a negative CurrentStep, EVENT_FAILED without
  // FailureReason, EVENT_CONFIG_APPLIED without AppliedConfigVersion or with
  // one newer than the job's ConfigVersion), NOT_FOUND for an unknown job, FAILED_PRECONDITION for
  // EVENT_STOPPED while the job is InProgress (no stop was ordered).
  void ReportTrainingStatus(const v1::ReportTrainingStatusRequest& request,
                            v1::ReportTrainingStatusResponse* response, DoneCallback done);

  // As WatchTrainingJob, for the ConnectAgent stream of an agent: while the
  // registration lives an agent is connected to the job, which is what a
  // stop of the job waits for (see StopWaitLimits), and holds its host's
  // name (`agent`: core/jobs/job_hosts.h; its replica is this server's).
  // The host's connection is recorded in the job (TrainingHosts), and its
  // loss when the registration is destroyed. ALREADY_EXISTS naming the
  // holder when another agent holds the name, FAILED_PRECONDITION when a
  // multi-host job has all its hosts (ConnectHost).
  absl::StatusOr<std::unique_ptr<WatchRegistration>> WatchAsAgent(const std::string& job_name,
                                                                  HostAgent agent,
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

  // What the manager holds now, counted in one pass under its lock (for
  // metrics, at scrape time: O(jobs + rules), no I/O). Thread-safe.
  struct StatusCounts {
    std::map<JobStatus, int64_t> jobs;               // Committed jobs by status.
    std::map<RuleStatus, int64_t> rule_evaluations;  // Debugging and profiler rules.
    int64_t client_watches = 0;                      // WatchTrainingJob registrations.
    int64_t agent_watches = 0;                       // WatchAsAgent registrations.
  };
  StatusCounts CountStatuses() const;

  // What the committer has done since the start, for diagnostics and
  // benchmarks. Thread-safe.
  using CommitStats = core::CommitStats;  // See core/manager/group_committer.h.
  CommitStats commit_stats() const;

  const TrainingJobManagerOptions& options() const { return options_; }
  // The storage the manager writes, for parts that keep its tables in order
  // beside it (ChangeFeedPruner). Thread-safe (Storage is).
  persistence::Storage& storage() const { return *storage_; }

  // Read-your-writes across replicas: `done` gets OK once this manager has
  // applied every change committed to the storage (by any server) before
  // the call; at once if it does not follow the feed. UNAVAILABLE (saying
  // so) if the storage cannot be read, or when shutting down. `done` runs
  // on the feed thread or the caller's; it must not block.
  void AwaitCaughtUp(DoneCallback done);
  // Runs `read` with `done` at once on a server that does not follow a feed,
  // else once AwaitCaughtUp succeeded; its error goes to `done` instead.
  void AfterCaughtUp(absl::AnyInvocable<void(DoneCallback) &&> read, DoneCallback done);
  // AwaitCaughtUp, blocking the caller up to `timeout` (DEADLINE_EXCEEDED
  // then). For the synchronous paths (WatchTrainingJob, WatchAsAgent).
  absl::Status CatchUpNow(absl::Duration timeout);

  // What following the feed did since the start. Thread-safe.
  struct FeedStats {
    int64_t applied_sequence = 0;   // Every change up to it is applied.
    int64_t reads = 0;              // ReadChangesAfter calls.
    int64_t applied = 0;            // Other servers' changes applied.
    int64_t skipped = 0;            // Own (or superseded) changes skipped.
    int64_t conflicts = 0;          // Writes that failed ABORTED and were re-run.
    bool storage_reachable = true;  // The last read of the feed succeeded.
  };
  FeedStats feed_stats() const;
  // Called (on the feed thread) each time reading the feed starts failing
  // (false) or works again (true): e.g. to report NOT_SERVING in health
  // checks while the database cannot be reached. Thread-safe.
  void SetFeedReachabilityObserver(std::function<void(bool reachable)> observer);

 private:
  using Change = JobMutation;
  // Runs under mu_: must be quick and must not call back into the manager.
  using Mutation = MutationFunction;
  // A committed change of a job, for the commit observers.
  using Observed = std::vector<std::pair<std::string, std::shared_ptr<const JobRecord>>>;
  using WatchesToDrain = WatchHub::WatchesToDrain;

  struct JobEntry {
    std::shared_ptr<const JobRecord> committed;  // What readers see.
    // `committed` serialized: written to storage, and served by Describe
    // without copying or encoding the record again.
    std::shared_ptr<const std::string> committed_encoded;
    std::shared_ptr<const JobRecord> latest;  // Committed + queued changes.
    int queued_changes = 0;
    // The storage's row version of `committed` (persistence::kAbsent if
    // none), and the one `latest` will have once written.
    int64_t version = persistence::kAbsent;
    int64_t latest_version = persistence::kAbsent;
    // The change feed sequence number of `committed` (0: loaded at start):
    // a change of the feed at or below it is already in.
    int64_t sequence = 0;
    // The watches that get the job's commits (none once it is settled).
    WatchHub::WatchList watches;
    // The agents' watches (also in `watches` until the job is settled), and
    // when the last one went away (InfinitePast: none since the start).
    std::vector<const JobWatch*> agents;
    absl::Time agents_absent_since = absl::InfinitePast();
    // The host each agent watch holds (ConnectHost), to release it.
    std::map<const JobWatch*, HostAgent> agent_hosts;
  };
  using JobMap = std::map<std::string, JobEntry>;
  // One page of ListTrainingJobs, collected from the committed jobs.
  struct ListQuery;

  // What the group committer asks of the jobs (see CommitTarget).
  class CommitOutcomes;

  TrainingJobManager(std::unique_ptr<persistence::Storage> storage,
                     TrainingJobManagerOptions options);

  absl::Status Load();
  // Starts the threads and pools once the jobs are loaded (Create).
  void StartThreads();
  // Computes the change (`mutation` on the job's latest state) and queues it
  // for the committer; `done` gets the commit's outcome, or the refusal.
  // A replica that does not know the job yet reads the change feed and tries
  // once more before answering NOT_FOUND.
  void Mutate(const std::string& job_name, const Mutation& mutation, DoneCallback done,
              std::optional<persistence::CheckLease> fence = std::nullopt);
  // Mutate's one try: OK once the change is queued (`done` moved into it);
  // else the refusal, with `done` left to the caller.
  absl::Status TryMutate(const std::string& job_name, const Mutation& mutation,
                         DoneCallback& done, const std::optional<persistence::CheckLease>& fence);
  // Runs `mutation` on the job's latest state and, if it succeeds, makes
  // the change the latest (returned to be queued); else the error.
  absl::StatusOr<PendingCommit> ComputeLocked(const std::string& job_name,
                                              std::shared_ptr<const Mutation> mutation,
                                              int attempts) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // CommitTarget, through CommitOutcomes (on the committer thread).
  void PublishWritten(std::vector<PendingCommit>& group, absl::Time now)
      ABSL_LOCKS_EXCLUDED(mu_);
  void RollBackFailed(std::vector<PendingCommit>& group, const absl::Status& written,
                      bool conflict) ABSL_LOCKS_EXCLUDED(mu_);
  bool TakeOutFenced(const std::string& stale_job, std::vector<PendingCommit>& group,
                     std::vector<PendingCommit>& taken) ABSL_LOCKS_EXCLUDED(mu_);
  // After a version conflict: reads the feed, then runs the mutations of
  // `commits` again, in order, on the states it brought, and queues them
  // first; a commit out of attempts fails with ABORTED. Calls the `done`s of
  // those that fail now.
  void RetryAfterConflict(std::vector<PendingCommit> commits, const absl::Status& conflict);
  // The error a commit gets instead of being run again, if any.
  std::optional<absl::Status> RetryRefusalLocked(const PendingCommit& commit,
                                                 const absl::Status& conflict)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads the feed from applied_through_ to its end and applies what it
  // holds (each page under apply_mu_). Returns the storage's error if a
  // read fails.
  absl::Status CatchUp() ABSL_LOCKS_EXCLUDED(apply_mu_, mu_);
  // Applies one page of the feed (each change skipped if already in).
  void ApplyChangesLocked(const std::vector<persistence::JobChange>& changes, absl::Time now,
                          WatchesToDrain& to_drain, Observed& observed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies one change of the feed (skipped if already in); adds what the
  // observers must hear to `observed`.
  void ApplyChangeLocked(const persistence::JobChange& change, absl::Time now,
                         WatchesToDrain& to_drain, Observed& observed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes `record` (nullptr: deleted) the job's committed state and brings
  // everything that follows it up to date: the indexes, the deadline, the
  // watches (`done` runs once they have it; returned to the caller to run if
  // there are none). Erases an entry left with nothing.
  DoneCallback CommitStateLocked(JobMap::iterator it, std::shared_ptr<const JobRecord> record,
                                 std::shared_ptr<const std::string> encoded, absl::Time now,
                                 DoneCallback done, WatchesToDrain& to_drain)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CallObservers(const Observed& observed);
  // The feed thread: reads the feed when woken (LISTEN/NOTIFY, a reader
  // waiting in AwaitCaughtUp) or every change_poll_interval, and keeps this
  // server's agent presence records.
  void FollowLoop();
  // Waits (on the feed thread) until woken, the next poll or heartbeat is
  // due, or the feed is to stop; hands over the catch-up waiters. False once
  // stopping.
  bool AwaitFollowWork(absl::Time poll_at, absl::Time next_heartbeat,
                       std::vector<DoneCallback>& waiters);
  // Tells the reachability observer when reading the feed starts failing or
  // works again.
  void ReportFeedReachability(const absl::Status& caught_up, bool& reported_failure);
  void WakeFollower();
  // Writes this server's agents of the jobs whose count changed (all, when
  // the heartbeat is due).
  void WritePresence(bool heartbeat);
  // The agents of a job connected to the other servers, from storage.
  AgentPresence RemotePresence(const std::string& job_name);
  // Runs `validated` with the call's arguments and `done` on the validation
  // pool (its checks read the file system), or answers `done` with
  // UNAVAILABLE once shutting down.
  template <typename Request, typename Response>
  void OnValidationPool(void (TrainingJobManager::*validated)(const Request&, Response*,
                                                              DoneCallback),
                        const Request& request, Response* response, DoneCallback done);
  void CreateValidated(const v1::CreateTrainingJobRequest& request,
                       v1::CreateTrainingJobResponse* response, DoneCallback done);
  void UpdateValidated(const v1::UpdateTrainingJobRequest& request,
                       v1::UpdateTrainingJobResponse* response, DoneCallback done);
  // Describe and List from the committed state in memory.
  void DescribeCommitted(const v1::DescribeTrainingJobRequest& request,
                         v1::DescribeTrainingJobResponse* response, DoneCallback done);
  void ListCommitted(const v1::ListTrainingJobsRequest& request,
                     v1::ListTrainingJobsResponse* response, DoneCallback done);
  // The committed jobs matching `query` in its order after its token, up to
  // one more than its limit (to learn whether another page follows).
  std::vector<std::shared_ptr<const JobRecord>> CollectPage(const ListQuery& query) const
      ABSL_LOCKS_EXCLUDED(mu_);
  void CollectByNameLocked(const ListQuery& query,
                           std::vector<std::shared_ptr<const JobRecord>>& page) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void CollectByCreationLocked(const ListQuery& query,
                               std::vector<std::shared_ptr<const JobRecord>>& page) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void CollectByStatusLocked(const ListQuery& query,
                             std::vector<std::shared_ptr<const JobRecord>>& page) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Publishes a committed change (see CommitStateLocked). If there are
  // watches, `commit.done` moves to their deliveries, to run once all have
  // it.
  void PublishLocked(PendingCommit& commit, absl::Time now, WatchesToDrain& to_drain)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RollBackLocked(const std::string& job_name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void IndexLocked(const std::string& name, const JobRecord* before, const JobRecord* after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `agent`: the host an agent's watch holds (nullopt for other watches).
  absl::StatusOr<std::unique_ptr<WatchRegistration>> RegisterWatch(
      const std::string& job_name, JobWatcher* watcher, const std::optional<HostAgent>& agent);
  // Queues the connection of an agent's host (ConnectHost) unless the job
  // is settled; its refusal otherwise.
  absl::Status ConnectHostLocked(const std::string& job_name, const HostAgent& agent)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records (Mutate) that the host of an agent's watch lost its agent.
  void DisconnectHostOf(const std::string& job_name, HostAgent agent);
  // At start-up: the hosts the records show connected through this replica
  // lost their streams with the previous run.
  void ReleaseHostsOfPreviousRun();
  // The job's committed state in a new watch, and the watch in the job's
  // lists (unless it is settled). NOT_FOUND for an unknown job.
  absl::StatusOr<std::shared_ptr<JobWatch>> AddWatchLocked(const std::string& job_name,
                                                           JobWatcher* watcher, bool agent)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Unregisters `watch` from its job (WatchHub::Unwatch): when it returns,
  // none of its callbacks is running (unless on this very thread) or will run.
  void Unwatch(const std::shared_ptr<JobWatch>& watch);
  absl::Time Now() const { return options_.clock->Now(); }
  AgentPresence PresenceLocked(const JobEntry& entry) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets (or cancels) the job's deadline from its committed record.
  void ArmDeadlineLocked(const std::string& job_name, const JobEntry& entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A deadline passed (on the deadline thread): enforces MaxRuntimeInSeconds
  // or ends a stop's wait, as the job's latest state then calls for.
  void OnDeadline(const std::string& job_name);
  // Whether the feed is followed (the option, and a storage with a feed).
  bool following() const { return following_; }

  const TrainingJobManagerOptions options_;
  std::unique_ptr<persistence::Storage> storage_;
  // When this manager started: waits for agents to reconnect count from it.
  const absl::Time started_at_;

  // Held while this manager's writes or the feed's changes are applied, so
  // that they are applied in storage order and observers hear them in that
  // order. Taken before mu_; also orders the feed's reads.
  absl::Mutex apply_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // Set by Create (the option, if the storage has a feed) before any thread.
  bool following_ = false;

  // Guards the jobs; taken before the committer's and the watches' locks.
  mutable absl::Mutex mu_;
  // Every change of the feed up to this sequence number is applied.
  int64_t applied_through_ ABSL_GUARDED_BY(mu_) = 0;
  // Deleted jobs' sequence numbers, until the feed is applied past them:
  // an older change of the feed must not bring the job back.
  std::map<std::string, int64_t> tombstones_ ABSL_GUARDED_BY(mu_);
  FeedStats feed_stats_ ABSL_GUARDED_BY(mu_);
  // Jobs whose number of agents here changed since last written.
  std::set<std::string> presence_dirty_ ABSL_GUARDED_BY(mu_);
  JobMap jobs_ ABSL_GUARDED_BY(mu_);
  // Committed jobs by (creation time in microseconds, name), for listing.
  std::set<std::pair<int64_t, std::string>> by_creation_ ABSL_GUARDED_BY(mu_);
  size_t committed_count_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  // Shutdown is complete (later calls return at once).
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;

  // Observers are called with observers_mu_ held (shared), outside mu_, so
  // that RemoveCommitObserver can wait for calls in flight. Never held
  // together with mu_.
  mutable absl::Mutex observers_mu_;
  std::map<int64_t, CommitObserver> observers_ ABSL_GUARDED_BY(observers_mu_);
  int64_t next_observer_id_ ABSL_GUARDED_BY(observers_mu_) = 1;

  // The feed thread's work (FollowLoop), under follow_mu_.
  absl::Mutex follow_mu_ ABSL_ACQUIRED_AFTER(mu_);
  absl::CondVar follow_cv_;
  bool follow_wake_ ABSL_GUARDED_BY(follow_mu_) = false;
  bool follow_stop_ ABSL_GUARDED_BY(follow_mu_) = false;
  std::vector<DoneCallback> catch_up_waiters_ ABSL_GUARDED_BY(follow_mu_);
  std::function<void(bool)> reachability_observer_ ABSL_GUARDED_BY(follow_mu_);
  std::thread follower_;
  // LISTEN/NOTIFY wakes the feed thread while it lives (null: polling).
  std::unique_ptr<persistence::ChangeSubscription> subscription_;
  // The parts (created once the jobs are loaded). The deadline timer calls
  // OnDeadline, which takes mu_, so it is shut down without mu_ held.
  std::unique_ptr<CommitOutcomes> commit_outcomes_;
  std::unique_ptr<GroupCommitter> committer_;
  std::unique_ptr<base::DeadlineTimer> deadlines_;
  // Validates Create and Update requests (file-system checks).
  std::unique_ptr<base::ThreadPool> validation_pool_;
  // Delivers committed changes to watchers; registrations may outlive the
  // manager (destroying them afterwards does nothing).
  std::unique_ptr<WatchHub> watch_hub_;
};

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_MANAGER_TRAINING_JOB_MANAGER_H_
