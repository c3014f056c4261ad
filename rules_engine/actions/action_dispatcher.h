// ActionDispatcher: carries out the rule actions recorded on jobs
// (RuleParameters["action_json"]: StopTraining, Email, SMS).
//
// The job record is the outbox: a rule's IssuesFound and its Pending actions
// are written together (core/rule_actions.h), so an action is never lost and
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
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "core/training_job_manager.h"
#include "metrics/action_metrics.h"
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
  std::shared_ptr<core::Clock> clock;
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

 private:
  struct Tracked {
    std::string job_name;
    int attempts = 0;
    absl::Time due;
    // kQueued: waiting for `due`; kRunning: a thread carries it out;
    // kRecorded: its outcome is being written, the entry goes once the
    // manager commits it (until then, a commit that still shows it Pending
    // must not queue it again).
    enum class State { kQueued, kRunning, kRecorded } state = State::kQueued;
    // Sinks that accepted this notification already (not sent again on a
    // retry by this process).
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
  void WorkerLoop();
  Outcome Execute(const core::JobRecord& job, const v1::RuleAction& action,
                  std::set<std::string>& accepted_by);
  Outcome StopTraining(const core::JobRecord& job, const v1::RuleAction& action);
  Outcome Notify(const core::JobRecord& job, const v1::RuleAction& action,
                 std::set<std::string>& accepted_by);
  absl::Duration Backoff(int attempts) const;

  core::TrainingJobManager* const manager_;
  const ActionDispatcherOptions options_;
  const std::shared_ptr<core::Clock> clock_;
  int64_t jump_listener_id_ = 0;  // Set by Start.

  mutable absl::Mutex mu_;
  absl::CondVar cv_;  // Signalled when an action is queued or on shutdown.
  // Pending actions by ActionId.
  std::map<std::string, Tracked> tracked_ ABSL_GUARDED_BY(mu_);
  // SetRuleActionStatus calls whose completion has not run yet.
  int records_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t observer_id_ = 0;  // Set by Start.
  std::vector<std::thread> threads_;
};

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_ACTIONS_ACTION_DISPATCHER_H_
