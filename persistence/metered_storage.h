// MeteredStorage: a Storage that times every Write and ForEachJob of the
// storage it wraps (SQLite or PostgreSQL) into metrics::DatabaseMetrics
// (debugplane_database_duration_seconds{operation}, and
// debugplane_database_errors_total{operation} for the failed ones). The
// results are passed through unchanged.

#ifndef DEBUGPLANE_PERSISTENCE_METERED_STORAGE_H_
#define DEBUGPLANE_PERSISTENCE_METERED_STORAGE_H_

#include <memory>

#include "metrics/database_metrics.h"
#include "persistence/storage.h"

namespace debugplane::persistence {

class MeteredStorage final : public Storage {
 public:
  // REQUIRES: `storage` is not null; `metrics` is not null and outlives
  // this object. Thread-safe as `storage` is.
  MeteredStorage(std::unique_ptr<Storage> storage, metrics::DatabaseMetrics* metrics);

  absl::Status Write(const WriteBatch& batch) override;
  // Times the whole scan, `visit` included (it runs once, at start-up).
  absl::Status ForEachJob(const std::function<absl::Status(const JobRow&)>& visit) override;

 private:
  const std::unique_ptr<Storage> storage_;
  metrics::DatabaseMetrics* const metrics_;
};

// `storage` metered if `metrics` is not null; `storage` itself otherwise.
std::unique_ptr<Storage> Metered(std::unique_ptr<Storage> storage,
                                 metrics::DatabaseMetrics* metrics);

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_METERED_STORAGE_H_
