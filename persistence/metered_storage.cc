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

template <typename Call>
auto MeteredStorage::Timed(metrics::DatabaseOperation operation, Call call) -> decltype(call()) {
  const Stopwatch stopwatch;
  auto result = call();
  metrics_->Observe(operation, stopwatch.Elapsed(), result.ok());
  return result;
}

MeteredStorage::MeteredStorage(std::unique_ptr<Storage> storage, metrics::DatabaseMetrics* metrics)
    : storage_(std::move(storage)), metrics_(metrics) {}

absl::Status MeteredStorage::Write(const WriteBatch& batch) {
  const Stopwatch stopwatch;
  absl::Status status = storage_->Write(batch);
  metrics_->Observe(metrics::DatabaseOperation::kWrite, stopwatch.Elapsed(), status.ok());
  return status;
}

absl::StatusOr<WriteResult> MeteredStorage::WriteAndReport(const WriteBatch& batch) {
  return Timed(metrics::DatabaseOperation::kWrite, [&] { return storage_->WriteAndReport(batch); });
}

absl::StatusOr<std::optional<JobRow>> MeteredStorage::ReadJob(const std::string& name) {
  return Timed(metrics::DatabaseOperation::kRead, [&] { return storage_->ReadJob(name); });
}

absl::StatusOr<std::vector<JobChange>> MeteredStorage::ReadChangesAfter(int64_t after,
                                                                        int limit) {
  return Timed(metrics::DatabaseOperation::kRead,
               [&] { return storage_->ReadChangesAfter(after, limit); });
}

absl::StatusOr<int64_t> MeteredStorage::LatestChangeSequence() {
  return Timed(metrics::DatabaseOperation::kRead, [&] { return storage_->LatestChangeSequence(); });
}

std::unique_ptr<ChangeSubscription> MeteredStorage::SubscribeToChanges(
    std::function<void()> wake) {
  return storage_->SubscribeToChanges(std::move(wake));
}

absl::StatusOr<int64_t> MeteredStorage::PruneChanges(int64_t modified_before_us, int limit) {
  return Timed(metrics::DatabaseOperation::kWrite,
               [&] { return storage_->PruneChanges(modified_before_us, limit); });
}

absl::Status MeteredStorage::PutAgentPresence(const std::vector<AgentPresenceRow>& rows) {
  return Timed(metrics::DatabaseOperation::kWrite, [&] { return storage_->PutAgentPresence(rows); });
}

absl::StatusOr<std::vector<AgentPresenceRow>> MeteredStorage::ReadAgentPresence(
    const std::string& job_name) {
  return Timed(metrics::DatabaseOperation::kRead,
               [&] { return storage_->ReadAgentPresence(job_name); });
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
