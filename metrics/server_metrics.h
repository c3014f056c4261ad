// ServerMetrics: every metric of the debugplane server on one registry, so
// that the server assembly (service/server_app.h) builds them once and hands
// each component the part it records into.

#ifndef DEBUGPLANE_METRICS_SERVER_METRICS_H_
#define DEBUGPLANE_METRICS_SERVER_METRICS_H_

#include "metrics/action_metrics.h"
#include "metrics/database_metrics.h"
#include "metrics/evaluation_metrics.h"
#include "metrics/job_metrics.h"
#include "metrics/lease_metrics.h"
#include "metrics/object_store_metrics.h"
#include "metrics/registry.h"
#include "metrics/request_metrics.h"

namespace debugplane::metrics {

// Thread-safe. Its members live as long as it does.
struct ServerMetrics {
  MetricsRegistry registry;
  JobMetrics jobs{registry.registry()};
  EvaluationMetrics evaluation{registry.registry()};
  ObjectStoreMetrics object_store{registry.registry()};
  DatabaseMetrics database{registry.registry()};
  ActionMetrics actions{registry.registry()};
  RequestMetrics requests{registry.registry()};
  LeaseMetrics leases{registry.registry()};
};

}  // namespace debugplane::metrics

#endif  // DEBUGPLANE_METRICS_SERVER_METRICS_H_
