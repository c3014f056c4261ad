// ActionDispatcher: carries out the rule actions recorded on jobs
// (RuleParameters["action_json"]: StopTraining, Email, SMS).
//
// The job record is the outbox: a rule's IssuesFound and its Pending actions
// are written together (core/jobs/rule_actions.h), so an action is never lost and
// never triggered twice. The dispatcher observes committed jobs, carries out
// every Pending action on its own threads (sinks block on the network), and
// records the outcome on the job (durable, pushed to watchers):
// - StopTraining stops the one InProgress job whose name starts with the
//   action's prefix (with several matches none is stopped and the action is
//   Skipped naming them; with none, Skipped). Without a prefix it stops the
//   rule's own job, even if other job names start with that name.
// - Email and SMS are delivered to every configured sink that handles the
//   channel; failures worth retrying are retried with exponential backoff
//   (attempts persisted on the action), permanent ones and exhausted retries
//   end Failed with the last error; with no sink for the channel the action
//   is Skipped saying how to configure one.
// After a restart, actions still Pending are carried out again: delivery is
// at least once (a crash between a sink's acceptance and its record repeats
// it; receivers can drop repeats by ActionId), StopTraining is idempotent.

#ifndef DEBUGPLANE_RULES_ENGINE_ACTIONS_ACTION_DISPATCHER_H_
#define DEBUGPLANE_RULES_ENGINE_ACTIONS_ACTION_DISPATCHER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "core/manager/training_job_manager.h"
#include "core/replication/lease_keeper.h"
#include "metrics/action_metrics.h"
#include "persistence/action_outbox.h"
#include "rules_engine/actions/notification_sink.h"

namespace debugplane::rules_engine {

struct ActionDispatcherOptions {
  std::vector<std::shared_ptr<NotificationSink>> sinks;
  // Threads that carry out actions (each blocks on one sink at a time).
  int threads = 2;
  // Deliveries of one notification before it ends Failed.
  int max_attempts = 8;
  // Backoff after the first failed attempt; doubles per attempt up to
  // max_backoff.
  absl::Duration initial_backoff = absl::Seconds(1);
  absl::Duration max_backoff = absl::Minutes(5);
  // When retries are due; the system clock when null (tests move a
  // FakeClock, and waiting threads wake when it jumps).
  std::shared_ptr<base::Clock> clock;
  // Server replicas sharing one database: a job's actions are carried out
  // by the replica that holds its lease (picked up when it acquires it,
  // dropped when it loses it), each under a claim in `outbox` that lasts
  // claim_duration (longer than one delivery may take, sink timeouts
  // included), and their outcomes (and a StopTraining) are written under
  // the lease's fence. An action already claimed by a replica that lost the
  // lease waits until that claim expires. Null: one server, no claims.
  // `leases` is not owned; it must be shut down before the dispatcher.
  core::LeaseKeeper* leases = nullptr;
  std::shared_ptr<persistence::ActionOutbox> outbox;
  absl::Duration claim_duration = absl::Minutes(2);
  // Where every attempt's outcome is counted; null: nowhere. Must outlive
  // the dispatcher.
  metrics::ActionMetrics* metrics = nullptr;
};

class ActionDispatcher {
 public:
  // REQUIRES: `manager` outlives the dispatcher.
  ActionDispatcher(core::TrainingJobManager* manager, ActionDispatcherOptions options);
  // Shuts down.
  ~ActionDispatcher();

  ActionDispatcher(const ActionDispatcher&) = delete;
  ActionDispatcher& operator=(const ActionDispatcher&) = delete;

  // Starts the threads, observes the manager's commits and picks up every
  // action already Pending (work left by a previous run). Idempotent.
  void Start();

  // Stops observing and joins the threads; a delivery in flight finishes
  // (bounded by its sink's timeout), and so do the manager's completions of
  // outcomes being recorded. Pending actions stay Pending on disk for the
  // next start. Idempotent.
  // REQUIRES: the manager is not shut down yet (its completions must run).
  void Shutdown();

  // Actions known Pending, queued or being carried out (for tests, metrics).
  size_t pending_actions() const;

  // The leases' listeners (options.leases): picks up the Pending actions of
  // a job whose lease this replica acquired; forgets those of a job whose
  // lease it lost (one being carried out finishes; its outcome is refused
  // by the fence if another replica took the lease over meanwhile).
  void OnLeaseAcquired(const std::string& job_name);
  void OnLeaseLost(const std::string& job_name);

 private:
  struct Tracked {
    std::string job_name;
    int attempts = 0;
    absl::Time due;
    // The outbox's claim while this replica carries it out.
    std::optional<persistence::ActionClaim> claim;
    // kQueued: waiting for `due`; kRunning: a thread carries it out;
    // kRecorded: its outcome is being written, the entry goes once the
    // manager commits it (until then, a commit that still shows it Pending
    // must not queue it again).
    enum class State { kQueued, kRunning, kRecorded } state = State::kQueued;
    // Sinks that accepted this notification already (not sent again on a
    // retry by this process), as "sink N" (N: the place in options.sinks).
    std::set<std::string> accepted_by;
  };
  // What carrying out an action decided.
  struct Outcome {
    v1::RuleActionStatus::Value status = v1::RuleActionStatus::Pending;
    std::string details;
    bool retry = false;  // Pending: try again after a backoff.
  };

  void OnCommit(const std::string& job_name, const std::shared_ptr<const core::JobRecord>& job);
  void TrackLocked(const core::JobRecord& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether this replica carries out the job's actions (it holds the lease,
  // or there are no leases).
  bool OwnsLocked(const std::string& job_name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Before carrying out an action (no lock held): the outbox's claim.
  enum class Gate { kGo, kLater, kDrop };
  Gate Claim(const std::string& action_id, const std::string& job_name,
             std::optional<persistence::ActionClaim>& claim);
  // One attempt at carrying out an action, from its worker.
  struct Attempt {
    std::string action_id;
    std::string job_name;
    std::set<std::string> accepted_by;  // Updated by Execute.
    int number = 0;                     // 1 for the first attempt.
    // Set by CarryOut: the job (keeps `action` alive), the action (null if
    // gone), whether to go on, the claim and what carrying it out decided.
    std::shared_ptr<const core::JobRecord> job;
    const v1::RuleAction* action = nullptr;
    Gate gate = Gate::kDrop;
    std::optional<persistence::ActionClaim> claim;
    Outcome outcome;
  };
  // An outcome to record through the manager.
  struct RecordRequest {
    std::string action_id;
    std::string job_name;
    v1::RuleActionStatus::Value status;
    std::string details;
    int attempts;
    std::optional<persistence::ActionClaim> claim;
  };

  // Marks the claims of recorded outcomes done (on a worker, no lock held).
  void CompleteClaims();
  // A worker: completes claims, waits for the queued action due first, and
  // carries it out (CarryOut), settles (SettleLocked) and records (Record)
  // it, in turn, until shutdown.
  void WorkerLoop();
  // The queued action due first; tracked_.end() if none.
  std::map<std::string, Tracked>::iterator NextQueuedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Claims the action and executes it while it is still Pending and the
  // lease is ours (no lock held).
  void CarryOut(Attempt& attempt);
  // Updates the tracked action after `attempt`: dropped, queued again later,
  // or its outcome (a retry's backoff, giving up after max_attempts) to
  // record, returned.
  std::optional<RecordRequest> SettleLocked(const Attempt& attempt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the outcome through the manager (no lock held); OnRecorded runs
  // when it is committed or refused.
  void Record(RecordRequest record);
  void OnRecorded(const std::string& action_id, const std::string& job_name, bool final_status,
                  const std::optional<persistence::ActionClaim>& claim,
                  const absl::Status& recorded);
  Outcome Execute(const core::JobRecord& job, const v1::RuleAction& action,
                  std::set<std::string>& accepted_by,
                  const std::optional<persistence::CheckLease>& fence);
  Outcome StopTraining(const core::JobRecord& job, const v1::RuleAction& action,
                       const std::optional<persistence::CheckLease>& fence);
  Outcome Notify(const core::JobRecord& job, const v1::RuleAction& action,
                 std::set<std::string>& accepted_by);
  absl::Duration Backoff(int attempts) const;

  core::TrainingJobManager* const manager_;
  const ActionDispatcherOptions options_;
  const std::shared_ptr<base::Clock> clock_;
  int64_t jump_listener_id_ = 0;  // Set by Start.

  mutable absl::Mutex mu_;
  absl::CondVar cv_;  // Signalled when an action is queued or on shutdown.
  // Pending actions by ActionId.
  std::map<std::string, Tracked> tracked_ ABSL_GUARDED_BY(mu_);
  // Claims whose action's outcome is durable, to be marked done.
  std::vector<persistence::ActionClaim> to_complete_ ABSL_GUARDED_BY(mu_);
  // SetRuleActionStatus calls whose completion has not run yet.
  int records_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t observer_id_ = 0;  // Set by Start.
  std::vector<std::thread> threads_;
};

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_ACTIONS_ACTION_DISPATCHER_H_
