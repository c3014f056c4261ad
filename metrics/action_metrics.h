// Rule actions (StopTraining, Email, SMS): how many wait in the outbox (the
// job records' Pending actions, as the dispatcher tracks them), set at
// scrape time, and how each attempt ended, recorded by
// rules_engine::ActionDispatcher.

#ifndef DEBUGPLANE_METRICS_ACTION_METRICS_H_
#define DEBUGPLANE_METRICS_ACTION_METRICS_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace debugplane::metrics {

class ActionMetrics {
 public:
  // Registers debugplane_outbox_pending_actions and
  // debugplane_rule_actions_total{type,outcome} in `registry`, which must
  // outlive this object. Throws (prometheus-cpp) if they are registered
  // there already.
  explicit ActionMetrics(prometheus::Registry& registry);

  // Actions Pending: queued, being carried out, or their outcome being
  // recorded.
  void SetPending(int64_t count);
  // One attempt at an action of `type` (StopTraining, Email or SMS: the
  // action types CreateTrainingJob accepts, a fixed set) ended in
  // `outcome`: Succeeded, Failed or Skipped (the action's final
  // RuleActionStatus), or Retried (it stays Pending for another attempt).
  void CountOutcome(absl::string_view type, absl::string_view outcome);

 private:
  prometheus::Gauge& pending_;
  prometheus::Family<prometheus::Counter>& outcomes_;
};

}  // namespace debugplane::metrics

#endif  // DEBUGPLANE_METRICS_ACTION_METRICS_H_
