#include "persistence/metered_storage.h"

#include <chrono>
#include <utility>

namespace debugplane::persistence {
namespace {

// A monotonic interval: wall-clock steps must not make a write look long.
class Stopwatch {
 public:
  absl::Duration Elapsed() const {
    return absl::FromChrono(std::chrono::steady_clock::now() - start_);
  }

 private:
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

MeteredStorage::MeteredStorage(std::unique_ptr<Storage> storage, metrics::DatabaseMetrics* metrics)
    : storage_(std::move(storage)), metrics_(metrics) {}

absl::Status MeteredStorage::Write(const WriteBatch& batch) {
  const Stopwatch stopwatch;
  absl::Status status = storage_->Write(batch);
  metrics_->Observe(metrics::DatabaseOperation::kWrite, stopwatch.Elapsed(), status.ok());
  return status;
}

absl::Status MeteredStorage::ForEachJob(const std::function<absl::Status(const JobRow&)>& visit) {
  const Stopwatch stopwatch;
  absl::Status status = storage_->ForEachJob(visit);
  metrics_->Observe(metrics::DatabaseOperation::kRead, stopwatch.Elapsed(), status.ok());
  return status;
}

std::unique_ptr<Storage> Metered(std::unique_ptr<Storage> storage,
                                 metrics::DatabaseMetrics* metrics) {
  if (metrics == nullptr) return storage;
  return std::make_unique<MeteredStorage>(std::move(storage), metrics);
}

}  // namespace debugplane::persistence
