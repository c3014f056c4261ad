// The storage interface: the only way debugplane reaches its database.
//
// Storage knows tables and rows, not what a training job means: a job row
// carries the serialized job record as an opaque blob plus the few columns
// that must be indexed. The domain layer (core/) owns the meaning. Another
// engine is added by implementing this interface.
//
// Several servers (replicas) may share one PostgreSQL database. Two parts of
// this interface exist for them (SQLite has them too, for one server):
//   - Optimistic concurrency: every job row has a version, 1 when created
//     and +1 per write. A put or delete may say which version it expects
//     (kAbsent for a create); Write fails with ABORTED, applying nothing of
//     the batch, if the row has another.
//   - A change feed: every write of a row (a put, or a delete's tombstone)
//     gets a change sequence number, in commit order: a reader that sees
//     change N has every change below N visible too. ReadChangesAfter pages
//     through it; SubscribeToChanges says when there may be new changes.

#ifndef DEBUGPLANE_PERSISTENCE_STORAGE_H_
#define DEBUGPLANE_PERSISTENCE_STORAGE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace debugplane::persistence {

// One row of the `training_jobs` table.
struct JobRow {
  std::string name;              // Primary key.
  int64_t creation_time_us = 0;  // Microseconds since the Unix epoch.
  int64_t last_modified_us = 0;  // Microseconds since the Unix epoch.
  std::string status;            // e.g. "InProgress"; indexed for filters.
  std::string record;            // Serialized job record, opaque here.
  // Set by reads: the row's version (1 after its creation, +1 per write).
  // Ignored by puts: the storage sets it.
  int64_t version = 0;
};

// The version a write may expect of a row that does not exist (a create).
inline constexpr int64_t kAbsent = 0;

// Inserts the row or replaces the row with the same name. With an
// `expected_version`, only if the row has that version now (kAbsent: only
// if there is no such row); without, whatever it has.
struct PutJob {
  JobRow row;
  std::optional<int64_t> expected_version;
};

// Deletes the row with this name; deleting a missing row is not an error
// (and leaves no change) unless a version is expected. With an
// `expected_version`, only if the row has that version now.
struct DeleteJob {
  std::string name;
  std::optional<int64_t> expected_version;
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
  void Put(JobRow row, std::optional<int64_t> expected_version = std::nullopt) {
    ops_.emplace_back(PutJob{std::move(row), expected_version});
  }
  void Delete(std::string name, std::optional<int64_t> expected_version = std::nullopt) {
    ops_.emplace_back(DeleteJob{std::move(name), expected_version});
  }
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

// Where a committed batch landed: per operation (in the batch's order), the
// change sequence number it got (0: it changed nothing, a delete of a
// missing row) and the row version it left (a delete: its tombstone's; a
// CheckLease: 0 and 0).
struct WriteResult {
  std::vector<int64_t> sequences;
  std::vector<int64_t> versions;
};

// One entry of the change feed.
struct JobChange {
  int64_t sequence = 0;  // Commit-ordered; unique; gaps are possible.
  std::string name;
  int64_t version = 0;   // The row's version after the change.
  bool deleted = false;  // A tombstone: the row was deleted.
  JobRow row;            // The row as written (empty for a tombstone).
};

// While it lives, the storage calls the subscriber's `wake` when new
// changes may be in the feed (see Storage::SubscribeToChanges).
class ChangeSubscription {
 public:
  virtual ~ChangeSubscription() = default;
};

// One server's agents connected to one job (replicas: a stop waits for
// the job's agents whichever server they are connected to).
struct AgentPresenceRow {
  std::string job_name;
  std::string replica_id;
  int agents = 0;
  int64_t heartbeat_us = 0;     // When the server last confirmed the count.
  int64_t absent_since_us = 0;  // When its last agent of the job left (0: never).
};

// The ABORTED status of a write that expected version `expected` (kAbsent:
// no row) of job `name`, whose row has version `actual` (nullopt: none).
absl::Status VersionConflictError(const std::string& name, int64_t expected,
                                  std::optional<int64_t> actual);

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
  // A version a put or delete expects that the row does not have fails the
  // whole batch with ABORTED naming the job and both versions ("absent" for
  // a missing row).
  virtual absl::Status Write(const WriteBatch& batch) = 0;

  // Write, also saying where each operation landed in the change feed.
  // Same contract as Write. The default (engines without a feed) calls
  // Write and reports no sequences or versions (empty vectors).
  virtual absl::StatusOr<WriteResult> WriteAndReport(const WriteBatch& batch);

  // The stored row named `name`, with its version; nullopt if there is none.
  // Errors as ForEachJob's. The default is UNIMPLEMENTED.
  virtual absl::StatusOr<std::optional<JobRow>> ReadJob(const std::string& name);

  // Up to `limit` changes with sequence numbers above `after`, in sequence
  // order. Commit order: once a change is returned, no change with a lower
  // sequence number can appear later, so a reader may resume after the
  // last one it got. Fewer than `limit` means the feed held no more when it
  // was read. The default is UNIMPLEMENTED (no feed).
  virtual absl::StatusOr<std::vector<JobChange>> ReadChangesAfter(int64_t after, int limit);

  // The highest change sequence number committed (0: none yet). The
  // default is UNIMPLEMENTED.
  virtual absl::StatusOr<int64_t> LatestChangeSequence();

  // Calls `wake` (on a thread of the storage's, never inside another call
  // of this interface) whenever changes may have been committed by anyone
  // (PostgreSQL: LISTEN/NOTIFY), and also once after each (re)connection of
  // its listener, since notifications sent meanwhile are lost. `wake` must
  // not block; it reads nothing itself (it schedules a ReadChangesAfter).
  // Returns nullptr if the engine cannot tell (SQLite, the default): then
  // the reader polls. Destroying the subscription stops the calls (it
  // waits for one in progress).
  virtual std::unique_ptr<ChangeSubscription> SubscribeToChanges(std::function<void()> wake);

  // Deletes up to `limit` superseded entries of the change feed, oldest
  // first: a change of a job that a later change of the same job replaced,
  // if its row was last modified before `modified_before_us` (a tombstone
  // counts as modified at 0). The latest change of every job stays, so a
  // reader that resumes after any sequence number still reaches every job's
  // current state, in commit order; what it may miss is an intermediate state
  // older than the horizon. Returns how many entries were deleted (fewer than
  // `limit`: none of the kind is left). The default is UNIMPLEMENTED.
  virtual absl::StatusOr<int64_t> PruneChanges(int64_t modified_before_us, int limit);

  // Agent presence (replicas): records each row, replacing the row of the
  // same job and replica. Not part of the job rows, versions or feed. The
  // default (engines with one server: SQLite) is UNIMPLEMENTED.
  virtual absl::Status PutAgentPresence(const std::vector<AgentPresenceRow>& rows);
  // Every server's row of the job (the caller judges their heartbeats).
  // The default is UNIMPLEMENTED.
  virtual absl::StatusOr<std::vector<AgentPresenceRow>> ReadAgentPresence(
      const std::string& job_name);

  // Calls `visit` once per stored job row, in ascending name order.
  // Stops at and returns the first non-OK status that `visit` returns.
  // Returns an error naming the file and cause if the rows cannot be read.
  virtual absl::Status ForEachJob(const std::function<absl::Status(const JobRow&)>& visit) = 0;
};

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_STORAGE_H_
