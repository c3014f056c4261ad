#include "metrics/lease_metrics.h"

namespace debugplane::metrics {

LeaseMetrics::LeaseMetrics(prometheus::Registry& registry)
    : owned_(prometheus::BuildGauge()
                 .Name("debugplane_leases_owned")
                 .Help("Evaluation leases (jobs whose rules this server evaluates) owned now")
                 .Register(registry)
                 .Add({})),
      takeovers_(prometheus::BuildCounter()
                     .Name("debugplane_lease_takeovers_total")
                     .Help("Evaluation leases taken over from another replica after they expired")
                     .Register(registry)
                     .Add({})) {}

void LeaseMetrics::SetOwned(int64_t count) { owned_.Set(static_cast<double>(count)); }

void LeaseMetrics::CountTakeover() { takeovers_.Increment(); }

}  // namespace debugplane::metrics
