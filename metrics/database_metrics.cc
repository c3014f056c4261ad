#include "metrics/database_metrics.h"

#include <algorithm>

#include "metrics/family.h"

namespace debugplane::metrics {
namespace {

// An fsync on a fast disk is a fraction of a millisecond; a loaded
// PostgreSQL over a network, tens of milliseconds; a full scan at start-up,
// seconds.
const prometheus::Histogram::BucketBoundaries kDurationBuckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10};

}  // namespace

DatabaseMetrics::DatabaseMetrics(prometheus::Registry& registry)
    : durations_(
          HistogramFamily(registry, "debugplane_database_duration_seconds",
                          "Seconds the database took per operation: write (one atomic, durable "
                          "batch of job changes) or read (a scan of the job rows)")),
      write_duration_(durations_.Add({{"operation", "write"}}, kDurationBuckets)),
      read_duration_(durations_.Add({{"operation", "read"}}, kDurationBuckets)),
      errors_(CounterFamily(registry, "debugplane_database_errors_total",
                            "Database operations that failed, by operation (write, read)")),
      write_errors_(errors_.Add({{"operation", "write"}})),
      read_errors_(errors_.Add({{"operation", "read"}})) {}

void DatabaseMetrics::Observe(DatabaseOperation operation, absl::Duration duration, bool ok) {
  const double seconds = std::max(0.0, absl::ToDoubleSeconds(duration));
  if (operation == DatabaseOperation::kWrite) {
    write_duration_.Observe(seconds);
    if (!ok) write_errors_.Increment();
  } else {
    read_duration_.Observe(seconds);
    if (!ok) read_errors_.Increment();
  }
}

}  // namespace debugplane::metrics
