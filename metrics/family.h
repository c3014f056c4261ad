// Registering a metric family: the one place the metric classes of this
// folder build prometheus-cpp families from a name and a help text.
//
// Each function registers the family `name` with `help` in `registry`
// (which must outlive the family) and returns it; the caller adds the
// series (Add with its labels). Throws (prometheus-cpp) if `name` is
// registered there already as another kind, or, with MetricsRegistry's
// registry, at all.

#ifndef DEBUGPLANE_METRICS_FAMILY_H_
#define DEBUGPLANE_METRICS_FAMILY_H_

#include <string>

#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace debugplane::metrics {

prometheus::Family<prometheus::Counter>& CounterFamily(prometheus::Registry& registry,
                                                       const std::string& name,
                                                       const std::string& help);
prometheus::Family<prometheus::Gauge>& GaugeFamily(prometheus::Registry& registry,
                                                   const std::string& name,
                                                   const std::string& help);
prometheus::Family<prometheus::Histogram>& HistogramFamily(prometheus::Registry& registry,
                                                           const std::string& name,
                                                           const std::string& help);

}  // namespace debugplane::metrics

#endif  // DEBUGPLANE_METRICS_FAMILY_H_
