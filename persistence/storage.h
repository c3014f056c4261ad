// The storage interface: the only way debugplane reaches its database.
//
// Storage knows tables and rows, not what a training job means: a job row
// carries the serialized job record as an opaque blob plus the few columns
// that must be indexed. The domain layer (core/) owns the meaning. Another
// engine is added by implementing this interface.

#ifndef DEBUGPLANE_PERSISTENCE_STORAGE_H_
#define DEBUGPLANE_PERSISTENCE_STORAGE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"

namespace debugplane::persistence {

// One row of the `training_jobs` table.
struct JobRow {
  std::string name;               // Primary key.
  int64_t creation_time_us = 0;   // Microseconds since the Unix epoch.
  int64_t last_modified_us = 0;   // Microseconds since the Unix epoch.
  std::string status;             // e.g. "InProgress"; indexed for filters.
  std::string record;             // Serialized job record, opaque here.
};

// Inserts the row or replaces the row with the same name.
struct PutJob {
  JobRow row;
};

// Deletes the row with this name; deleting a missing row is not an error.
struct DeleteJob {
  std::string name;
};

// Fencing (persistence/lease_table.h): the batch applies only if job
// `job_name`'s evaluation lease is held by `owner` with fencing token
// `token`; checked inside the batch's transaction, with the lease row locked
// against a concurrent takeover until the batch commits. Otherwise the whole
// batch fails with FAILED_PRECONDITION naming the job and both tokens
// (payload kLeaseFencePayload = the job's name), nothing written.
struct CheckLease {
  std::string job_name;
  std::string owner;  // The replica id that holds the lease.
  int64_t token = 0;  // The fencing token it acquired the lease with.
};

// The payload type_url under which a fencing refusal carries the job's name.
inline constexpr char kLeaseFencePayload[] = "debugplane.lease_fence_job";

using WriteOp = std::variant<PutJob, DeleteJob, CheckLease>;

// An ordered list of writes applied atomically by Storage::Write.
// Not thread-safe; build it on one thread, then hand it over.
class WriteBatch {
 public:
  void Put(JobRow row) { ops_.emplace_back(PutJob{std::move(row)}); }
  void Delete(std::string name) { ops_.emplace_back(DeleteJob{std::move(name)}); }
  void Check(CheckLease fence) { ops_.emplace_back(std::move(fence)); }
  // Appends all of `other`'s operations after this batch's own.
  void Append(const WriteBatch& other) {
    ops_.insert(ops_.end(), other.ops_.begin(), other.ops_.end());
  }
  void Clear() { ops_.clear(); }
  bool empty() const { return ops_.empty(); }
  size_t size() const { return ops_.size(); }
  const std::vector<WriteOp>& ops() const { return ops_; }

 private:
  std::vector<WriteOp> ops_;
};

// Abstract durable storage.
//
// Thread-safety: implementations must allow concurrent calls from several
// threads; debugplane writes from one committer thread and reads at start-up.
class Storage {
 public:
  virtual ~Storage() = default;

  // Applies every operation of `batch`, in order, atomically: after a crash
  // either all of them or none are visible.
  // Returns OK only once the batch is durable (synced to stable storage), so
  // an acknowledged write survives kill -9 and power loss.
  // On error nothing of the batch was applied; the status names the cause
  // (e.g. UNAVAILABLE "database is locked", RESOURCE_EXHAUSTED "disk full",
  // DATA_LOSS for corruption) and the file.
  virtual absl::Status Write(const WriteBatch& batch) = 0;

  // Calls `visit` once per stored job row, in ascending name order.
  // Stops at and returns the first non-OK status that `visit` returns.
  // Returns an error naming the file and cause if the rows cannot be read.
  virtual absl::Status ForEachJob(
      const std::function<absl::Status(const JobRow&)>& visit) = 0;
};

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_STORAGE_H_
