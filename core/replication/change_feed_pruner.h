// ChangeFeedPruner: keeps the change feed (persistence/storage.h) from
// growing without bound. Every job write adds a copy of the job's row to
// the feed; once a later change of the same job exists and the copy is older
// than the retention, only a reader more than `retention` behind could still
// want it, and such a reader reaches the job's current state through the
// later change anyway (Storage::PruneChanges). So the feed holds about one
// entry per job plus the last `retention` of writes.
//
// Each replica runs one (deleting what another already deleted is harmless);
// a pass every `interval`, in batches so that no transaction is long.

#ifndef DEBUGPLANE_CORE_REPLICATION_CHANGE_FEED_PRUNER_H_
#define DEBUGPLANE_CORE_REPLICATION_CHANGE_FEED_PRUNER_H_

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/periodic_thread.h"
#include "persistence/storage.h"

namespace debugplane::core {

struct ChangeFeedPrunerOptions {
  // Superseded changes last modified longer ago than this are deleted.
  absl::Duration retention = absl::Hours(1);
  // Time between passes.
  absl::Duration interval = absl::Minutes(1);
  // Entries deleted per PruneChanges call.
  int batch = 1000;
  std::shared_ptr<base::Clock> clock = base::SystemClock();
};

// Thread-safe.
class ChangeFeedPruner {
 public:
  // REQUIRES: `storage` outlives the pruner; options' durations positive and
  // batch > 0.
  ChangeFeedPruner(persistence::Storage* storage, ChangeFeedPrunerOptions options);
  // Shutdown().
  ~ChangeFeedPruner();

  ChangeFeedPruner(const ChangeFeedPruner&) = delete;
  ChangeFeedPruner& operator=(const ChangeFeedPruner&) = delete;

  // Starts the thread that runs a pass every `interval` (the first at
  // once). A failed pass is logged and retried at the next. Call once.
  void Start();
  // Stops the thread (waiting for a pass in progress). Idempotent.
  void Shutdown();

  // One pass on the caller's thread: deletes superseded changes older than
  // clock now - retention, batch by batch until none is left. Returns how
  // many were deleted, or the storage's error (what earlier batches deleted
  // stays deleted). UNIMPLEMENTED from a storage without a feed.
  absl::StatusOr<int64_t> PruneOnce();

  // Entries deleted by every pass so far.
  int64_t pruned() const;

 private:
  // A pass of the thread: PruneOnce, its outcome logged.
  void Pass();

  persistence::Storage* const storage_;
  const ChangeFeedPrunerOptions options_;
  mutable absl::Mutex mu_;
  int64_t pruned_ ABSL_GUARDED_BY(mu_) = 0;
  base::PeriodicThread thread_;
};

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_REPLICATION_CHANGE_FEED_PRUNER_H_
