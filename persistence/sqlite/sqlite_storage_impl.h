// Internal to SqliteStorage (sqlite_storage*.cc): the connection, its
// prepared statements and the steps of opening, migrating, writing and
// reading, all under one mutex. Not for use outside persistence/sqlite.

#ifndef DEBUGPLANE_PERSISTENCE_SQLITE_SQLITE_STORAGE_IMPL_H_
#define DEBUGPLANE_PERSISTENCE_SQLITE_SQLITE_STORAGE_IMPL_H_

#include <sqlite3.h>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "persistence/sqlite/sqlite_storage.h"
#include "persistence/sqlite/sqlite_wal_checkpointer.h"

namespace debugplane::persistence {
namespace sqlite_storage_internal {

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
struct StatementFinalizer {
  void operator()(sqlite3_stmt* statement) const { sqlite3_finalize(statement); }
};
using DbHandle = std::unique_ptr<sqlite3, DbCloser>;
using Statement = std::unique_ptr<sqlite3_stmt, StatementFinalizer>;

// Resets and unbinds a statement when the scope ends, so that its next use
// starts clean and a read statement does not keep its read transaction (and
// with it the WAL) pinned between calls.
class StatementUse {
 public:
  explicit StatementUse(const Statement& statement) : statement_(statement.get()) {}
  ~StatementUse() {
    sqlite3_reset(statement_);
    sqlite3_clear_bindings(statement_);
  }
  StatementUse(const StatementUse&) = delete;
  StatementUse& operator=(const StatementUse&) = delete;

 private:
  sqlite3_stmt* statement_;
};

// The status for result code `rc` of `doing` on the database at `path`.
// Call it right after the failing call: sqlite3_errmsg describes the
// connection's latest call. `db` may be null (sqlite3_open_v2 out of memory).
absl::Status SqliteError(absl::string_view path, sqlite3* db, int rc, absl::string_view doing);

}  // namespace sqlite_storage_internal

struct SqliteStorage::Impl {
  using Statement = sqlite_storage_internal::Statement;
  using DbHandle = sqlite_storage_internal::DbHandle;

  Impl(std::string path, bool create) : path(std::move(path)), create(create) {}
  ~Impl();

  absl::Status Error(int rc, absl::string_view doing) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return sqlite_storage_internal::SqliteError(path, db.get(), rc, doing);
  }

  // Opens and configures the connection, migrates the schema and prepares
  // the statements. On error the connection may be left half set up; the
  // destructor copes.
  absl::Status OpenLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The steps of OpenLocked: the connection with its busy timeout and
  // foreign keys; refusing a newer or half-made schema; WAL with
  // synchronous=FULL; the statements on the migrated tables.
  absl::Status ConnectLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  absl::Status CheckSchemaBeforeChangesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  absl::Status UseWalLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  absl::Status PrepareTableStatementsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  absl::Status MigrateLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The step from `from_version`, inside the caller's write transaction.
  absl::Status MigrateOneStepLocked(int from_version) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  absl::StatusOr<Statement> Prepare(const char* sql, unsigned int flags)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // A statement kept for the life of the connection, and its SQL.
  struct StatementSql {
    Statement* statement;
    const char* sql;
  };
  absl::Status PrepareAll(std::span<const StatementSql> list) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Runs SQL that takes no parameters and whose result rows are not needed.
  absl::Status Exec(const char* sql, absl::string_view doing) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Runs a statement that returns no rows (a prepared one, reset after).
  absl::Status Run(const Statement& statement, absl::string_view doing)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Prepares and steps a query to its first row, where the caller reads it.
  absl::StatusOr<Statement> QueryRow(const char* sql, absl::string_view doing)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  absl::StatusOr<int> ReadUserVersionLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  absl::StatusOr<WriteResult> WriteLocked(const WriteBatch& batch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Applies one operation and records its change under sequence number
  // `*sequence + 1` (advancing `*sequence`) if it changed a row.
  absl::Status ApplyLocked(const WriteOp& op, int64_t* sequence, WriteResult& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The version of the row `name` (nullopt if there is none).
  absl::StatusOr<std::optional<int64_t>> VersionLocked(const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  absl::Status RecordChangeLocked(int64_t sequence, const std::string& name, int64_t version,
                                  const JobRow* row) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  absl::StatusOr<int64_t> LatestSequenceLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // CheckLease: inside the write transaction (BEGIN IMMEDIATE holds the
  // database's write lock, so no lease changes until the batch commits).
  absl::Status CheckLeaseLocked(const CheckLease& fence) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void RollBackLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Appends up to kScanPageRows rows, in name order, with names above
  // `*after` (all names if null).
  absl::Status ReadPageLocked(const std::string* after, std::vector<JobRow>& rows)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  const std::string path;
  // Whether opening may create the file (only a new database's temporary
  // file: an existing database must be there, whole).
  const bool create;
  int schema_version = 0;  // Set by Open() before the object is shared.

  absl::Mutex mu;
  // The connection runs in SQLite's multi-thread mode (no mutex of its own):
  // `mu` guards it, its statements and its error message.
  DbHandle db ABSL_GUARDED_BY(mu);
  bool open_complete ABSL_GUARDED_BY(mu) = false;
  Statement begin ABSL_GUARDED_BY(mu);
  Statement commit ABSL_GUARDED_BY(mu);
  Statement rollback ABSL_GUARDED_BY(mu);
  Statement put ABSL_GUARDED_BY(mu);
  Statement remove ABSL_GUARDED_BY(mu);
  Statement check_lease ABSL_GUARDED_BY(mu);
  Statement scan_first ABSL_GUARDED_BY(mu);
  Statement scan_after ABSL_GUARDED_BY(mu);
  Statement version_of ABSL_GUARDED_BY(mu);
  Statement read_job ABSL_GUARDED_BY(mu);
  Statement latest_sequence ABSL_GUARDED_BY(mu);
  Statement set_sequence ABSL_GUARDED_BY(mu);
  Statement add_change ABSL_GUARDED_BY(mu);
  Statement changes_after ABSL_GUARDED_BY(mu);
  Statement prune_changes ABSL_GUARDED_BY(mu);
  // Checkpoints the WAL off the writer's commits (SqliteStorage::Open starts
  // it once the database is open; null before, and for a database being
  // created).
  std::unique_ptr<sqlite_storage_internal::WalCheckpointer> checkpointer ABSL_GUARDED_BY(mu);
};

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_SQLITE_SQLITE_STORAGE_IMPL_H_
