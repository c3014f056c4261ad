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
  return WriteAndReport(batch).status();
}

absl::StatusOr<WriteResult> FaultInjectingStorage::WriteAndReport(const WriteBatch& batch) {
  write_calls_.fetch_add(1);
  {
    absl::MutexLock lock(&mu_);
    if (write_failures_left_ != 0) {
      if (write_failures_left_ > 0) --write_failures_left_;
      return write_error_;
    }
  }
  // Outside the lock: a slow write must not hold up arming or healing.
  return base_->WriteAndReport(batch);
}

absl::Status FaultInjectingStorage::ReadError() {
  absl::MutexLock lock(&mu_);
  return read_error_;
}

absl::StatusOr<std::optional<JobRow>> FaultInjectingStorage::ReadJob(const std::string& name) {
  if (absl::Status error = ReadError(); !error.ok()) return error;
  return base_->ReadJob(name);
}

absl::StatusOr<std::vector<JobChange>> FaultInjectingStorage::ReadChangesAfter(int64_t after,
                                                                               int limit) {
  if (absl::Status error = ReadError(); !error.ok()) return error;
  return base_->ReadChangesAfter(after, limit);
}

absl::StatusOr<int64_t> FaultInjectingStorage::LatestChangeSequence() {
  if (absl::Status error = ReadError(); !error.ok()) return error;
  return base_->LatestChangeSequence();
}

std::unique_ptr<ChangeSubscription> FaultInjectingStorage::SubscribeToChanges(
    std::function<void()> wake) {
  return base_->SubscribeToChanges(std::move(wake));
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
