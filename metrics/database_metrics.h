// How long the database takes: every write (a group commit of job changes)
// and every read, and the ones that failed. Recorded by
// persistence::MeteredStorage around the server's storage (SQLite or
// PostgreSQL).

#ifndef DEBUGPLANE_METRICS_DATABASE_METRICS_H_
#define DEBUGPLANE_METRICS_DATABASE_METRICS_H_

#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace debugplane::metrics {

enum class DatabaseOperation { kWrite, kRead };

class DatabaseMetrics {
 public:
  // Registers debugplane_database_duration_seconds{operation} and
  // debugplane_database_errors_total{operation} in `registry`, which must
  // outlive this object. Throws (prometheus-cpp) if they are registered
  // there already.
  explicit DatabaseMetrics(prometheus::Registry& registry);

  // One `operation` that took `duration` and succeeded or not.
  void Observe(DatabaseOperation operation, absl::Duration duration, bool ok);

 private:
  prometheus::Family<prometheus::Histogram>& durations_;
  prometheus::Histogram& write_duration_;
  prometheus::Histogram& read_duration_;
  prometheus::Family<prometheus::Counter>& errors_;
  prometheus::Counter& write_errors_;
  prometheus::Counter& read_errors_;
};

}  // namespace debugplane::metrics

#endif  // DEBUGPLANE_METRICS_DATABASE_METRICS_H_
