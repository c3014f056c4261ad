#include "metrics/action_metrics.h"

#include <string>

#include "metrics/family.h"

namespace debugplane::metrics {

ActionMetrics::ActionMetrics(prometheus::Registry& registry)
    : pending_(
          GaugeFamily(registry, "debugplane_outbox_pending_actions",
                      "Rule actions Pending in the outbox (queued, being carried out, or their "
                      "outcome being recorded)")
              .Add({})),
      outcomes_(
          CounterFamily(registry, "debugplane_rule_actions_total",
                        "Attempts at rule actions by type (StopTraining, Email, SMS) and outcome "
                        "(Succeeded, Failed, Skipped; Retried: another attempt follows)")) {}

void ActionMetrics::SetPending(int64_t count) { pending_.Set(static_cast<double>(count)); }

void ActionMetrics::CountOutcome(absl::string_view type, absl::string_view outcome) {
  outcomes_.Add({{"type", std::string(type)}, {"outcome", std::string(outcome)}}).Increment();
}

}  // namespace debugplane::metrics
