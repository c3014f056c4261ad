// Metered(): a Storage that times every call of the storage it wraps
// (SQLite or PostgreSQL) into metrics::DatabaseMetrics
// (debugplane_database_duration_seconds{operation}, and
// debugplane_database_errors_total{operation} for the failed ones): writes
// (Write, WriteAndReport, PruneChanges, PutAgentPresence) as `write`,
// everything else as `read`. Every call, the feed's and presence's included,
// is passed on: Storage's defaults (UNIMPLEMENTED, no feed) would hide the
// engine's. The results are passed through unchanged.

#ifndef DEBUGPLANE_PERSISTENCE_METERED_STORAGE_H_
#define DEBUGPLANE_PERSISTENCE_METERED_STORAGE_H_

#include <memory>

#include "metrics/database_metrics.h"
#include "persistence/storage.h"

namespace debugplane::persistence {

// `storage` metered if `metrics` is not null; `storage` itself otherwise.
// REQUIRES: `storage` is not null; `metrics`, if not null, outlives the
// result. The result is thread-safe as `storage` is. SubscribeToChanges is
// not timed (it only registers); ForEachJob is timed whole, `visit`
// included (it runs once, at start-up).
std::unique_ptr<Storage> Metered(std::unique_ptr<Storage> storage,
                                 metrics::DatabaseMetrics* metrics);

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_METERED_STORAGE_H_
