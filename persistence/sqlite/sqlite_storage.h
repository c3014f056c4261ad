// SQLite implementation of Storage: one database file in WAL mode,
// synchronous=FULL, schema versioned with PRAGMA user_version and migrated at
// open, prepared statements only.

#ifndef DEBUGPLANE_PERSISTENCE_SQLITE_SQLITE_STORAGE_H_
#define DEBUGPLANE_PERSISTENCE_SQLITE_SQLITE_STORAGE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "persistence/storage.h"

namespace debugplane::persistence {

// The schema version this build writes. Open() migrates older databases up to
// it and refuses newer ones.
inline constexpr int kSqliteSchemaVersion = 4;

// Thread-safe: one connection, every call serialized by a mutex. Another
// connection to the same file (another process, or another SqliteStorage) is
// waited for up to 5 seconds, then the call fails with UNAVAILABLE.
class SqliteStorage final : public Storage {
 public:
  // Opens the database at `path` and migrates its schema. A missing file is
  // created whole (see CreateDatabase). The parent directory must exist.
  // Returns FAILED_PRECONDITION if the file was written by a newer debugplane
  // (schema version above kSqliteSchemaVersion) or is empty or has no tables
  // (a half-made file: the message says how to recover), DATA_LOSS if it is
  // not a SQLite database or is corrupt, UNAVAILABLE if it cannot be read,
  // opened or locked; each message names the path.
  static absl::StatusOr<std::unique_ptr<SqliteStorage>> Open(const std::string& path);

  ~SqliteStorage() override;  // Closes the database cleanly (checkpoints WAL).

  SqliteStorage(const SqliteStorage&) = delete;
  SqliteStorage& operator=(const SqliteStorage&) = delete;

  absl::Status Write(const WriteBatch& batch) override;
  absl::StatusOr<WriteResult> WriteAndReport(const WriteBatch& batch) override;
  absl::StatusOr<std::optional<JobRow>> ReadJob(const std::string& name) override;
  // The feed of this file. SubscribeToChanges is the default (nullptr):
  // another process writing the file is not noticed, readers poll.
  absl::StatusOr<std::vector<JobChange>> ReadChangesAfter(int64_t after, int limit) override;
  absl::StatusOr<int64_t> LatestChangeSequence() override;
  // One short write transaction (the jobs' writes wait for it).
  absl::StatusOr<int64_t> PruneChanges(int64_t modified_before_us, int limit) override;
  // Names are ordered bytewise (SQLite's BINARY collation). Rows are read in
  // pages of a few hundred, each page a consistent snapshot; `visit` runs
  // without the lock held, so it may call Write. A Write made during the scan
  // may or may not be seen for the rows not visited yet.
  absl::Status ForEachJob(const std::function<absl::Status(const JobRow&)>& visit) override;

  // The schema version of the open database (after migration).
  int schema_version() const;

  // Checkpoints of the WAL that copied all of it into the database, made
  // since Open by a thread and connection of their own once the log passes
  // 1000 pages, instead of by the write that took it there (whose callers
  // would wait for the copy and its fsync).
  int64_t wal_checkpoints() const;

 private:
  struct Impl;
  // Creates a new database at `path` atomically: built and migrated under a
  // temporary name, synced, renamed, the directory synced. A crash leaves
  // either no file at `path` or a complete database.
  static absl::Status CreateDatabase(const std::string& path);
  explicit SqliteStorage(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_SQLITE_SQLITE_STORAGE_H_
