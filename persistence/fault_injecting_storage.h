// A Storage wrapper that fails on command: makes storage-failure tests easy.

#ifndef DEBUGPLANE_PERSISTENCE_FAULT_INJECTING_STORAGE_H_
#define DEBUGPLANE_PERSISTENCE_FAULT_INJECTING_STORAGE_H_

#include <atomic>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "persistence/storage.h"

namespace debugplane::persistence {

// Forwards to a wrapped Storage unless a failure is armed.
// Thread-safe.
class FaultInjectingStorage final : public Storage {
 public:
  // Takes ownership of `base`. REQUIRES: base != nullptr.
  explicit FaultInjectingStorage(std::unique_ptr<Storage> base);

  // Makes the next `count` calls to Write fail with `error` without touching
  // the wrapped storage. count < 0 means every call until Heal().
  // REQUIRES: !error.ok().
  void FailWrites(absl::Status error, int count = -1);
  // Makes calls to ForEachJob and the other reads fail with `error` until
  // Heal().
  void FailReads(absl::Status error);
  // Disarms every failure.
  void Heal();

  // Number of Write calls seen, failed or not.
  int write_calls() const { return write_calls_.load(); }

  absl::Status Write(const WriteBatch& batch) override;
  absl::Status ForEachJob(const std::function<absl::Status(const JobRow&)>& visit) override;
  // As Write (counted by write_calls, failed by FailWrites).
  absl::StatusOr<WriteResult> WriteAndReport(const WriteBatch& batch) override;
  // Failed by FailReads, like ForEachJob.
  absl::StatusOr<std::optional<JobRow>> ReadJob(const std::string& name) override;
  absl::StatusOr<std::vector<JobChange>> ReadChangesAfter(int64_t after, int limit) override;
  absl::StatusOr<int64_t> LatestChangeSequence() override;
  std::unique_ptr<ChangeSubscription> SubscribeToChanges(std::function<void()> wake) override;
  absl::Status PutAgentPresence(const std::vector<AgentPresenceRow>& rows) override {
    return base_->PutAgentPresence(rows);
  }
  absl::StatusOr<std::vector<AgentPresenceRow>> ReadAgentPresence(
      const std::string& job_name) override {
    return base_->ReadAgentPresence(job_name);
  }

 private:
  absl::Status ReadError();

  std::unique_ptr<Storage> base_;
  std::atomic<int> write_calls_{0};
  mutable absl::Mutex mu_;
  absl::Status write_error_ ABSL_GUARDED_BY(mu_);
  int write_failures_left_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status read_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_FAULT_INJECTING_STORAGE_H_
