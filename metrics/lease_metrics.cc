#include "metrics/lease_metrics.h"

#include "metrics/family.h"

namespace debugplane::metrics {

LeaseMetrics::LeaseMetrics(prometheus::Registry& registry)
    : owned_(GaugeFamily(registry, "debugplane_leases_owned",
                         "Evaluation leases (jobs whose rules this server evaluates) owned now")
                 .Add({})),
      takeovers_(
          CounterFamily(registry, "debugplane_lease_takeovers_total",
                        "Evaluation leases taken over from another replica after they expired")
              .Add({})) {}

void LeaseMetrics::SetOwned(int64_t count) { owned_.Set(static_cast<double>(count)); }

void LeaseMetrics::CountTakeover() { takeovers_.Increment(); }

}  // namespace debugplane::metrics
