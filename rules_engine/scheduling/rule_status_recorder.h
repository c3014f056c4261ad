// RuleStatusRecorder: records the verdicts of rule evaluations through the
// job manager until they are durable.
//
// A write the storage refuses (a full disk, an I/O error: the manager answers
// UNAVAILABLE and rolls the change back) is retried with exponential backoff,
// by a timer thread, so no evaluation worker waits for the storage. Records of
// one rule are written one at a time, in the order given: a record is sent
// once the one before it is durable (or refused for good). Retrying is safe:
// a status that did become durable is "nothing changed" for the manager the
// second time, and a rule's actions are recorded in the same write as its
// IssuesFound, so they are never triggered twice.
//
// A refusal that a retry cannot change ends the record: NOT_FOUND (the job
// or rule is gone), FAILED_PRECONDITION (the rule is already terminal with
// another status, e.g. Stopped), INVALID_ARGUMENT. What is still waiting at
// Shutdown is dropped: those rules stay InProgress and are evaluated again
// after the restart.

#ifndef DEBUGPLANE_RULES_ENGINE_SCHEDULING_RULE_STATUS_RECORDER_H_
#define DEBUGPLANE_RULES_ENGINE_SCHEDULING_RULE_STATUS_RECORDER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "base/clock.h"
#include "core/jobs/job_record.h"
#include "core/replication/lease_keeper.h"
#include "core/manager/training_job_manager.h"

namespace debugplane::rules_engine {

struct RuleStatusRecorderOptions {
  // The clock that times the retries (a FakeClock in tests).
  std::shared_ptr<base::Clock> clock = base::SystemClock();
  // The wait before the first retry of a record; doubled after every
  // refusal, up to max_backoff.
  absl::Duration initial_backoff = absl::Milliseconds(200);
  absl::Duration max_backoff = absl::Seconds(30);
  // With server replicas: records are written under the job's lease fence,
  // and dropped once this replica no longer holds the lease (the new holder
  // evaluates the rule again from its recorded progress). Null: one server.
  const core::LeaseKeeper* leases = nullptr;
};

class RuleStatusRecorder {
 public:
  // REQUIRES: `manager` outlives the recorder.
  RuleStatusRecorder(core::TrainingJobManager* manager, RuleStatusRecorderOptions options);
  // Shuts down.
  ~RuleStatusRecorder();

  RuleStatusRecorder(const RuleStatusRecorder&) = delete;
  RuleStatusRecorder& operator=(const RuleStatusRecorder&) = delete;

  // Records `status` of rule `rule` of job `job` with `details`, preceded by
  // its progress: LastEvaluatedStep `last_evaluated_step` when that is >= 0,
  // ReadProgress `read` when given (a terminal rule's progress is frozen, so
  // it goes first), until durable. Returns at once; calls back only
  // `on_durable` (if given), once, when the status is committed, on the
  // manager's thread outside the recorder's lock (it must not block; for
  // metrics); not if the rule already had `status` when the record was
  // sent (a repeat changes nothing). Thread-safe; may be called with locks held that the manager's
  // done callbacks do not take.
  void Record(const std::string& job, const std::string& rule, int64_t last_evaluated_step,
              core::RuleStatus status, std::string details,
              std::optional<v1::RuleReadProgress> read = std::nullopt,
              std::function<void()> on_durable = nullptr);

  // Records waiting to be durable (sent, or waiting for a retry), for tests.
  size_t pending() const;

  // When the first waiting record of the rule is sent again, if it waits
  // for a retry (for diagnostics and tests). Thread-safe.
  std::optional<absl::Time> NextRetry(const std::string& job, const std::string& rule) const;

  // Stops retrying and drops what waits: when it returns no write is sent
  // any more (one already sent completes). Idempotent.
  void Shutdown();

 private:
  // Everything the manager's done callbacks reach: they may run after the
  // recorder is gone (a write in flight at Shutdown), so they hold it.
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_SCHEDULING_RULE_STATUS_RECORDER_H_
