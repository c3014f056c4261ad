#include "persistence/fault_injecting_storage.h"

#include <cassert>
#include <utility>

namespace debugplane::persistence {

FaultInjectingStorage::FaultInjectingStorage(std::unique_ptr<Storage> base)
    : base_(std::move(base)) {
  assert(base_ != nullptr);
}

void FaultInjectingStorage::FailWrites(absl::Status error, int count) {
  assert(!error.ok());
  absl::MutexLock lock(&mu_);
  write_error_ = std::move(error);
  write_failures_left_ = count;
}

void FaultInjectingStorage::FailReads(absl::Status error) {
  assert(!error.ok());
  absl::MutexLock lock(&mu_);
  read_error_ = std::move(error);
}

void FaultInjectingStorage::Heal() {
  absl::MutexLock lock(&mu_);
  write_error_ = absl::OkStatus();
  write_failures_left_ = 0;
  read_error_ = absl::OkStatus();
}

absl::Status FaultInjectingStorage::Write(const WriteBatch& batch) {
  write_calls_.fetch_add(1);
  {
    absl::MutexLock lock(&mu_);
    if (write_failures_left_ != 0) {
      if (write_failures_left_ > 0) --write_failures_left_;
      return write_error_;
    }
  }
  // Outside the lock: a slow write must not hold up arming or healing.
  return base_->Write(batch);
}

absl::Status FaultInjectingStorage::ForEachJob(
    const std::function<absl::Status(const JobRow&)>& visit) {
  {
    absl::MutexLock lock(&mu_);
    if (!read_error_.ok()) return read_error_;
  }
  return base_->ForEachJob(visit);
}

}  // namespace debugplane::persistence
