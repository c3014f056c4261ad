// MeteredStorage: a Storage that times every call of the storage it wraps
// (SQLite or PostgreSQL) into metrics::DatabaseMetrics
// (debugplane_database_duration_seconds{operation}, and
// debugplane_database_errors_total{operation} for the failed ones): writes
// (Write, WriteAndReport, PutAgentPresence) as `write`, everything else as
// `read`. Every call, the feed's and presence's included, is passed on:
// Storage's defaults (UNIMPLEMENTED, no feed) would hide the engine's. The
// results are passed through unchanged.

#ifndef DEBUGPLANE_PERSISTENCE_METERED_STORAGE_H_
#define DEBUGPLANE_PERSISTENCE_METERED_STORAGE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "metrics/database_metrics.h"
#include "persistence/storage.h"

namespace debugplane::persistence {

class MeteredStorage final : public Storage {
 public:
  // REQUIRES: `storage` is not null; `metrics` is not null and outlives
  // this object. Thread-safe as `storage` is.
  MeteredStorage(std::unique_ptr<Storage> storage, metrics::DatabaseMetrics* metrics);

  absl::Status Write(const WriteBatch& batch) override;
  absl::StatusOr<WriteResult> WriteAndReport(const WriteBatch& batch) override;
  absl::StatusOr<std::optional<JobRow>> ReadJob(const std::string& name) override;
  absl::StatusOr<std::vector<JobChange>> ReadChangesAfter(int64_t after, int limit) override;
  absl::StatusOr<int64_t> LatestChangeSequence() override;
  absl::StatusOr<int64_t> PruneChanges(int64_t modified_before_us, int limit) override;
  // Not timed: it only registers.
  std::unique_ptr<ChangeSubscription> SubscribeToChanges(std::function<void()> wake) override;
  absl::Status PutAgentPresence(const std::vector<AgentPresenceRow>& rows) override;
  absl::StatusOr<std::vector<AgentPresenceRow>> ReadAgentPresence(
      const std::string& job_name) override;
  // Times the whole scan, `visit` included (it runs once, at start-up).
  absl::Status ForEachJob(const std::function<absl::Status(const JobRow&)>& visit) override;

 private:
  // Runs `call`, recording its duration and success as `operation`.
  template <typename Call>
  auto Timed(metrics::DatabaseOperation operation, Call call) -> decltype(call());

  const std::unique_ptr<Storage> storage_;
  metrics::DatabaseMetrics* const metrics_;
};

// `storage` metered if `metrics` is not null; `storage` itself otherwise.
std::unique_ptr<Storage> Metered(std::unique_ptr<Storage> storage,
                                 metrics::DatabaseMetrics* metrics);

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_METERED_STORAGE_H_
