#include "persistence/metered_storage.h"

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace debugplane::persistence {
namespace {

using metrics::DatabaseOperation;

// A monotonic interval: wall-clock steps must not make a write look long.
class Stopwatch {
 public:
  absl::Duration Elapsed() const {
    return absl::FromChrono(std::chrono::steady_clock::now() - start_);
  }

 private:
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// Each call goes to `storage_`, timed as a read or a write (see Metered()).
class MeteredStorage final : public Storage {
 public:
  MeteredStorage(std::unique_ptr<Storage> storage, metrics::DatabaseMetrics* metrics)
      : storage_(std::move(storage)), metrics_(metrics) {}

  absl::Status Write(const WriteBatch& batch) override {
    return Timed(DatabaseOperation::kWrite, [&] { return storage_->Write(batch); });
  }
  absl::StatusOr<WriteResult> WriteAndReport(const WriteBatch& batch) override {
    return Timed(DatabaseOperation::kWrite, [&] { return storage_->WriteAndReport(batch); });
  }
  absl::StatusOr<std::optional<JobRow>> ReadJob(const std::string& name) override {
    return Timed(DatabaseOperation::kRead, [&] { return storage_->ReadJob(name); });
  }
  absl::StatusOr<std::vector<JobChange>> ReadChangesAfter(int64_t after, int limit) override {
    return Timed(DatabaseOperation::kRead,
                 [&] { return storage_->ReadChangesAfter(after, limit); });
  }
  absl::StatusOr<int64_t> LatestChangeSequence() override {
    return Timed(DatabaseOperation::kRead, [&] { return storage_->LatestChangeSequence(); });
  }
  absl::StatusOr<int64_t> PruneChanges(int64_t modified_before_us, int limit) override {
    return Timed(DatabaseOperation::kWrite,
                 [&] { return storage_->PruneChanges(modified_before_us, limit); });
  }
  std::unique_ptr<ChangeSubscription> SubscribeToChanges(std::function<void()> wake) override {
    return storage_->SubscribeToChanges(std::move(wake));
  }
  absl::Status PutAgentPresence(const std::vector<AgentPresenceRow>& rows) override {
    return Timed(DatabaseOperation::kWrite, [&] { return storage_->PutAgentPresence(rows); });
  }
  absl::StatusOr<std::vector<AgentPresenceRow>> ReadAgentPresence(
      const std::string& job_name) override {
    return Timed(DatabaseOperation::kRead,
                 [&] { return storage_->ReadAgentPresence(job_name); });
  }
  absl::Status ForEachJob(const std::function<absl::Status(const JobRow&)>& visit) override {
    return Timed(DatabaseOperation::kRead, [&] { return storage_->ForEachJob(visit); });
  }

 private:
  // Runs `call`, recording its duration and success as `operation`.
  template <typename Call>
  auto Timed(DatabaseOperation operation, Call call) -> decltype(call()) {
    const Stopwatch stopwatch;
    auto result = call();
    metrics_->Observe(operation, stopwatch.Elapsed(), result.ok());
    return result;
  }

  const std::unique_ptr<Storage> storage_;
  metrics::DatabaseMetrics* const metrics_;
};

}  // namespace

std::unique_ptr<Storage> Metered(std::unique_ptr<Storage> storage,
                                 metrics::DatabaseMetrics* metrics) {
  if (metrics == nullptr) return storage;
  return std::make_unique<MeteredStorage>(std::move(storage), metrics);
}

}  // namespace debugplane::persistence
