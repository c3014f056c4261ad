#include "persistence/sqlite/sqlite_storage.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "persistence/lease_fence.h"
#include "persistence/sqlite/sqlite_migrations.h"
#include "spdlog/spdlog.h"

namespace debugplane::persistence {
namespace {

// How long a statement waits for a lock held by another connection before it
// fails with SQLITE_BUSY. Only another connection to the same file competes
// (another process, or a second SqliteStorage): within one SqliteStorage the
// mutex serializes every call.
constexpr int kBusyTimeoutMs = 5000;

// Rows ForEachJob reads per hold of the mutex: bounds its memory and lets
// writes in between pages, and `visit` runs without the mutex held.
constexpr int kScanPageRows = 256;

static_assert(kSqliteSchemaVersion >= 1);

// Storage::PruneChanges: superseded changes (a later one of the same job
// exists; job_changes_by_name finds it) last modified before ?1, oldest
// first, at most ?2.
constexpr char kPruneChangesSql[] =
    "DELETE FROM job_changes WHERE sequence IN (SELECT c.sequence FROM job_changes c "
    "WHERE c.last_modified_us < ?1 AND EXISTS (SELECT 1 FROM job_changes n "
    "WHERE n.name = c.name AND n.sequence > c.sequence) ORDER BY c.sequence LIMIT ?2)";

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

absl::StatusCode CodeFor(int rc, int system_errno) {
  switch (rc & 0xff) {  // The primary code of an extended one.
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_CANTOPEN:
      return absl::StatusCode::kUnavailable;
    case SQLITE_FULL:
    case SQLITE_NOMEM:
      return absl::StatusCode::kResourceExhausted;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::StatusCode::kDataLoss;
    case SQLITE_IOERR:
      // The unix VFS reports ENOSPC as SQLITE_FULL, but an exceeded disk
      // quota or file size limit as a plain write error: out of space too.
      if (system_errno == ENOSPC || system_errno == EDQUOT || system_errno == EFBIG) {
        return absl::StatusCode::kResourceExhausted;
      }
      return absl::StatusCode::kInternal;
    default:
      return absl::StatusCode::kInternal;
  }
}

// The status for result code `rc` of `doing` on the database at `path`.
// Call it right after the failing call: sqlite3_errmsg describes the
// connection's latest call. `db` may be null (sqlite3_open_v2 out of memory).
absl::Status SqliteError(absl::string_view path, sqlite3* db, int rc, absl::string_view doing) {
  const char* detail = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  const int primary = rc & 0xff;
  // errno is only meaningful for the errors that come from a system call.
  const int system_errno = db != nullptr && (primary == SQLITE_IOERR ||
                                             primary == SQLITE_CANTOPEN || primary == SQLITE_FULL)
                               ? sqlite3_system_errno(db)
                               : 0;
  std::string message =
      absl::StrCat("sqlite database '", path, "': ", doing, ": ", detail, " (sqlite code ", rc);
  if (system_errno != 0) {
    absl::StrAppend(&message, ", ", std::generic_category().message(system_errno));
  }
  absl::StrAppend(&message, ")");
  return absl::Status(CodeFor(rc, system_errno), message);
}

// column_blob works for the TEXT columns too: it returns their bytes as
// stored, embedded NULs included. It returns null for an empty value.
std::string ColumnBytes(sqlite3_stmt* s, int i) {
  const void* data = sqlite3_column_blob(s, i);
  return data == nullptr ? std::string()
                         : std::string(static_cast<const char*>(data), sqlite3_column_bytes(s, i));
}

absl::Status TooNewError(absl::string_view path, int version) {
  return absl::FailedPreconditionError(absl::StrCat(
      "sqlite database '", path, "' has schema version ", version,
      ", newer than the schema version ", kSqliteSchemaVersion,
      " this debugplane understands: it was written by a newer debugplane; run that version, "
      "or use another database"));
}

absl::Status HalfMadeError(absl::string_view path, absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(
      "sqlite database '", path, "' ", what,
      ": it was not created by this server (a new database is created whole under a temporary "
      "name and then renamed), so it is a damaged or half-made file and its jobs may be lost. "
      "Restore it from a backup; or, if no jobs were ever stored there, delete it and start "
      "again to create a new database"));
}

// fsync of a file or directory by path; errors name it.
absl::Status SyncPath(const std::string& path, bool directory) {
  const int fd = open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDWR) | O_CLOEXEC);
  if (fd < 0 || fsync(fd) != 0) {
    const int error = errno;
    if (fd >= 0) close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot sync ", path, ": ", std::generic_category().message(error)));
  }
  close(fd);
  return absl::OkStatus();
}

}  // namespace

struct SqliteStorage::Impl {
  Impl(std::string path, bool create) : path(std::move(path)), create(create) {}
  ~Impl();

  absl::Status Error(int rc, absl::string_view doing) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return SqliteError(path, db.get(), rc, doing);
  }

  // Opens and configures the connection, migrates the schema and prepares
  // the statements. On error the connection may be left half set up; the
  // destructor copes.
  absl::Status OpenLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
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
};

SqliteStorage::Impl::~Impl() {
  absl::MutexLock lock(&mu);
  // Statements first: a connection with live statements does not close.
  for (Statement* statement :
       {&begin, &commit, &rollback, &put, &remove, &check_lease, &scan_first, &scan_after,
        &version_of, &read_job, &latest_sequence, &set_sequence, &add_change, &changes_after,
        &prune_changes}) {
    statement->reset();
  }
  if (db == nullptr) return;
  if (open_complete) {
    // Fold the WAL into the database and truncate it, so that a closed
    // database is one self-contained file that can be copied or backed up.
    if (int rc =
            sqlite3_exec(db.get(), "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr);
        rc != SQLITE_OK) {
      spdlog::warn("{}", Error(rc, "checkpointing the WAL at close").ToString());
    }
  }
  if (int rc = sqlite3_close(db.get()); rc != SQLITE_OK) {
    spdlog::warn("{}", Error(rc, "closing").ToString());
    return;  // The deleter's sqlite3_close_v2 closes it once it can.
  }
  (void)db.release();
}

absl::StatusOr<Statement> SqliteStorage::Impl::Prepare(const char* sql, unsigned int flags) {
  sqlite3_stmt* raw = nullptr;
  const int rc = sqlite3_prepare_v3(db.get(), sql, -1, flags, &raw, nullptr);
  Statement statement(raw);
  if (rc != SQLITE_OK) return Error(rc, absl::StrCat("preparing \"", sql, "\""));
  return statement;
}

absl::Status SqliteStorage::Impl::PrepareAll(std::span<const StatementSql> list) {
  for (const auto& [statement, sql] : list) {
    absl::StatusOr<Statement> prepared = Prepare(sql, SQLITE_PREPARE_PERSISTENT);
    if (!prepared.ok()) return prepared.status();
    *statement = *std::move(prepared);
  }
  return absl::OkStatus();
}

absl::Status SqliteStorage::Impl::Exec(const char* sql, absl::string_view doing) {
  // sqlite3_exec prepares and steps each statement of `sql` in turn; it is
  // only ever given SQL written in this program, never values.
  if (int rc = sqlite3_exec(db.get(), sql, nullptr, nullptr, nullptr); rc != SQLITE_OK) {
    return Error(rc, doing);
  }
  return absl::OkStatus();
}

absl::Status SqliteStorage::Impl::Run(const Statement& statement, absl::string_view doing) {
  StatementUse use(statement);
  if (int rc = sqlite3_step(statement.get()); rc != SQLITE_DONE) return Error(rc, doing);
  return absl::OkStatus();
}

absl::StatusOr<Statement> SqliteStorage::Impl::QueryRow(const char* sql, absl::string_view doing) {
  absl::StatusOr<Statement> query = Prepare(sql, 0);
  if (!query.ok()) return query.status();
  if (int rc = sqlite3_step(query->get()); rc != SQLITE_ROW) {
    if (rc != SQLITE_DONE) return Error(rc, doing);
    return absl::InternalError(
        absl::StrCat("sqlite database '", path, "': ", doing, ": no result row"));
  }
  return query;
}

absl::StatusOr<int> SqliteStorage::Impl::ReadUserVersionLocked() {
  absl::StatusOr<Statement> version = QueryRow("PRAGMA user_version", "reading the schema version");
  if (!version.ok()) return version.status();
  return sqlite3_column_int(version->get(), 0);
}

absl::Status SqliteStorage::Impl::OpenLocked() {
  sqlite3* raw = nullptr;
  // NOMUTEX: `mu` already serializes every use of the connection.
  const int rc = sqlite3_open_v2(
      path.c_str(), &raw,
      SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX, nullptr);
  db.reset(raw);  // Kept even on error: the handle carries the message and must be closed.
  if (rc != SQLITE_OK) return Error(rc, "opening");
  sqlite3_extended_result_codes(db.get(), 1);
  sqlite3_busy_timeout(db.get(), kBusyTimeoutMs);
  if (absl::Status s = Exec("PRAGMA foreign_keys = ON", "enabling foreign keys"); !s.ok()) {
    return s;
  }

  // Refuse a newer database before changing anything in it (switching to WAL
  // below rewrites its header). This first read also finds a file that is not
  // a database.
  absl::StatusOr<int> version = ReadUserVersionLocked();
  if (!version.ok()) return version.status();
  if (*version > kSqliteSchemaVersion) return TooNewError(path, *version);
  if (*version == 0 && !create) {
    // A database file with no schema at all is what an interrupted creation
    // by an older debugplane left behind; "migrating" it would silently
    // start from nothing, as if its jobs had never existed.
    absl::StatusOr<Statement> objects =
        QueryRow("SELECT count(*) FROM sqlite_master", "reading the schema");
    if (!objects.ok()) return objects.status();
    if (sqlite3_column_int(objects->get(), 0) == 0) return HalfMadeError(path, "has no tables");
  }

  // WAL: readers do not block the writer, and a commit costs one fsync of the
  // log instead of two of a rollback journal.
  absl::StatusOr<Statement> mode = QueryRow("PRAGMA journal_mode = WAL", "enabling WAL");
  if (!mode.ok()) return mode.status();
  if (const unsigned char* name = sqlite3_column_text(mode->get(), 0);
      name == nullptr || absl::string_view(reinterpret_cast<const char*>(name)) != "wal") {
    return absl::FailedPreconditionError(
        absl::StrCat("sqlite database '", path, "': cannot use WAL journal mode"));
  }
  mode->reset();  // Finalizes it, ending its read of the database.
  // FULL: every commit syncs the WAL, so a committed write survives power loss
  // (NORMAL, the usual WAL setting, may lose the latest commits).
  if (absl::Status s = Exec("PRAGMA synchronous = FULL", "setting synchronous=FULL"); !s.ok()) {
    return s;
  }

  // The transaction statements first: migration uses them. The others name
  // the table, which only exists once migrated.
  const StatementSql transaction_statements[] = {
      {&begin, "BEGIN IMMEDIATE"}, {&commit, "COMMIT"}, {&rollback, "ROLLBACK"}};
  const StatementSql table_statements[] = {
      {&put,
       "INSERT INTO training_jobs (name, creation_time_us, last_modified_us, status, record, "
       "version) VALUES (?1, ?2, ?3, ?4, ?5, ?6) "
       "ON CONFLICT (name) DO UPDATE SET creation_time_us = excluded.creation_time_us, "
       "last_modified_us = excluded.last_modified_us, status = excluded.status, "
       "record = excluded.record, version = excluded.version"},
      {&remove, "DELETE FROM training_jobs WHERE name = ?1"},
      {&check_lease, "SELECT owner, token FROM job_leases WHERE job_name = ?1"},
      {&scan_first,
       "SELECT name, creation_time_us, last_modified_us, status, record, version "
       "FROM training_jobs ORDER BY name LIMIT ?1"},
      {&scan_after,
       "SELECT name, creation_time_us, last_modified_us, status, record, version "
       "FROM training_jobs WHERE name > ?1 ORDER BY name LIMIT ?2"},
      {&version_of, "SELECT version FROM training_jobs WHERE name = ?1"},
      {&read_job,
       "SELECT name, creation_time_us, last_modified_us, status, record, version "
       "FROM training_jobs WHERE name = ?1"},
      {&latest_sequence, "SELECT last FROM change_sequence"},
      {&set_sequence, "UPDATE change_sequence SET last = ?1"},
      {&add_change,
       "INSERT INTO job_changes (sequence, name, version, deleted, creation_time_us, "
       "last_modified_us, status, record) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"},
      {&changes_after,
       "SELECT sequence, name, version, deleted, creation_time_us, last_modified_us, status, "
       "record FROM job_changes WHERE sequence > ?1 ORDER BY sequence LIMIT ?2"},
      {&prune_changes, kPruneChangesSql},
  };
  if (absl::Status s = PrepareAll(transaction_statements); !s.ok()) return s;
  if (absl::Status s = MigrateLocked(); !s.ok()) return s;
  if (absl::Status s = PrepareAll(table_statements); !s.ok()) return s;
  open_complete = true;
  return absl::OkStatus();
}

absl::Status SqliteStorage::Impl::MigrateLocked() {
  while (true) {
    // Each step in its own transaction: a crash mid-migration leaves the
    // database at the last completed version, and the next Open resumes.
    if (absl::Status s = Run(begin, "starting a schema migration"); !s.ok()) return s;
    // Read the version under the write lock: another process may have
    // migrated the database since this one last looked.
    absl::StatusOr<int> version = ReadUserVersionLocked();
    absl::Status step = version.status();
    if (step.ok() && *version > kSqliteSchemaVersion) step = TooNewError(path, *version);
    if (step.ok() && *version == kSqliteSchemaVersion) {
      RollBackLocked();  // Nothing was written.
      schema_version = *version;
      return absl::OkStatus();
    }
    if (step.ok()) step = MigrateOneStepLocked(*version);
    if (step.ok()) step = Run(commit, "committing a schema migration");
    if (!step.ok()) {
      RollBackLocked();
      return step;
    }
  }
}

absl::Status SqliteStorage::Impl::MigrateOneStepLocked(int from_version) {
  const std::span<const SqliteMigration> steps = SqliteMigrations();
  if (from_version < 0 || from_version >= static_cast<int>(steps.size()) ||
      steps[from_version].to_version != from_version + 1) {
    return absl::InternalError(absl::StrCat(
        "sqlite database '", path, "': no migration step from schema version ", from_version));
  }
  const SqliteMigration& step = steps[from_version];
  if (absl::Status s =
          Exec(step.sql, absl::StrCat("migrating to schema version ", step.to_version));
      !s.ok()) {
    return s;
  }
  // PRAGMA takes no bound parameters; the version is a constant of this
  // program, not outside input.
  const std::string set_version = absl::StrCat("PRAGMA user_version = ", step.to_version);
  if (absl::Status s = Exec(set_version.c_str(), "recording the schema version"); !s.ok()) {
    return s;
  }
  spdlog::info("sqlite database '{}': migrated the schema from version {} to {}", path,
               from_version, step.to_version);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> SqliteStorage::Impl::LatestSequenceLocked() {
  StatementUse use(latest_sequence);
  if (int rc = sqlite3_step(latest_sequence.get()); rc != SQLITE_ROW) {
    return Error(rc, "reading the change sequence");
  }
  return sqlite3_column_int64(latest_sequence.get(), 0);
}

absl::StatusOr<WriteResult> SqliteStorage::Impl::WriteLocked(const WriteBatch& batch) {
  // A ROLLBACK that failed after an earlier error leaves a transaction open;
  // end it rather than have every later batch fail inside it.
  if (!sqlite3_get_autocommit(db.get())) RollBackLocked();
  // IMMEDIATE takes the write lock now (waiting up to the busy timeout), so a
  // busy database fails the batch before any of it is applied. It also
  // orders the change sequence: one writer at a time takes numbers.
  if (absl::Status s = Run(begin, "starting a write transaction"); !s.ok()) return s;
  WriteResult result;
  absl::StatusOr<int64_t> sequence = LatestSequenceLocked();
  absl::Status written = sequence.status();
  const int64_t first = sequence.ok() ? *sequence : 0;
  for (size_t i = 0; i < batch.size() && written.ok(); ++i) {
    const WriteOp& op = batch.ops()[i];
    absl::Status applied;
    if (const auto* fence = std::get_if<CheckLease>(&op)) {
      applied = CheckLeaseLocked(*fence);
      result.sequences.push_back(0);  // A check changes nothing.
      result.versions.push_back(0);
    } else {
      applied = ApplyLocked(op, &*sequence, result);
    }
    if (!applied.ok()) {
      // A version conflict's message already says that nothing was applied.
      written = applied.code() == absl::StatusCode::kAborted
                    ? applied
                    : absl::Status(applied.code(), absl::StrCat(applied.message(), " (operation ",
                                                                i + 1, " of ", batch.size(), ")"));
      applied.ForEachPayload([&written](absl::string_view type, const absl::Cord& payload) {
        written.SetPayload(type, payload);
      });
    }
  }
  if (written.ok() && *sequence != first) {
    StatementUse use(set_sequence);
    sqlite3_bind_int64(set_sequence.get(), 1, *sequence);
    if (int rc = sqlite3_step(set_sequence.get()); rc != SQLITE_DONE) {
      written = Error(rc, "advancing the change sequence");
    }
  }
  if (written.ok()) written = Run(commit, "committing");
  if (written.ok()) return result;
  RollBackLocked();
  if (written.code() == absl::StatusCode::kAborted) return written;
  if (FencedJob(written).has_value()) return written;  // Says so already.
  return absl::Status(written.code(),
                      absl::StrCat(written.message(), "; no write of the batch was applied"));
}

absl::Status SqliteStorage::Impl::CheckLeaseLocked(const CheckLease& fence) {
  StatementUse use(check_lease);
  sqlite3_stmt* s = check_lease.get();
  int rc = sqlite3_bind_text64(s, 1, fence.job_name.data(), fence.job_name.size(), SQLITE_STATIC,
                               SQLITE_UTF8);
  if (rc == SQLITE_OK) rc = sqlite3_step(s);
  std::optional<FoundLease> found;
  if (rc == SQLITE_ROW) {
    const auto* owner = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    found = FoundLease{.owner = owner == nullptr ? "" : owner, .token = sqlite3_column_int64(s, 1)};
  } else if (rc != SQLITE_DONE) {
    return Error(rc, absl::StrCat("checking the lease of job '", fence.job_name, "'"));
  }
  return CheckFence(fence, found);
}

absl::StatusOr<std::optional<int64_t>> SqliteStorage::Impl::VersionLocked(const std::string& name) {
  StatementUse use(version_of);
  int rc = sqlite3_bind_text64(version_of.get(), 1, name.data(), name.size(), SQLITE_STATIC,
                               SQLITE_UTF8);
  if (rc == SQLITE_OK) rc = sqlite3_step(version_of.get());
  if (rc == SQLITE_ROW) return sqlite3_column_int64(version_of.get(), 0);
  if (rc == SQLITE_DONE) return std::nullopt;
  return Error(rc, absl::StrCat("reading the version of job '", name, "'"));
}

absl::Status SqliteStorage::Impl::RecordChangeLocked(int64_t sequence, const std::string& name,
                                                     int64_t version, const JobRow* row) {
  static const JobRow kTombstone;
  const JobRow& r = row != nullptr ? *row : kTombstone;
  StatementUse use(add_change);
  sqlite3_stmt* s = add_change.get();
  int rc = sqlite3_bind_int64(s, 1, sequence);
  if (rc == SQLITE_OK) {
    rc = sqlite3_bind_text64(s, 2, name.data(), name.size(), SQLITE_STATIC, SQLITE_UTF8);
  }
  if (rc == SQLITE_OK) rc = sqlite3_bind_int64(s, 3, version);
  if (rc == SQLITE_OK) rc = sqlite3_bind_int(s, 4, row == nullptr ? 1 : 0);
  if (rc == SQLITE_OK) rc = sqlite3_bind_int64(s, 5, r.creation_time_us);
  if (rc == SQLITE_OK) rc = sqlite3_bind_int64(s, 6, r.last_modified_us);
  if (rc == SQLITE_OK) {
    rc = sqlite3_bind_text64(s, 7, r.status.data(), r.status.size(), SQLITE_STATIC, SQLITE_UTF8);
  }
  if (rc == SQLITE_OK) {
    rc = sqlite3_bind_blob64(s, 8, r.record.data(), r.record.size(), SQLITE_STATIC);
  }
  if (rc == SQLITE_OK) rc = sqlite3_step(s);
  if (rc != SQLITE_DONE) {
    return Error(rc, absl::StrCat("recording the change of job '", name, "'"));
  }
  return absl::OkStatus();
}

absl::Status SqliteStorage::Impl::ApplyLocked(const WriteOp& op, int64_t* sequence,
                                              WriteResult& result) {
  const bool is_put = std::holds_alternative<PutJob>(op);
  const std::string& name = is_put ? std::get<PutJob>(op).row.name : std::get<DeleteJob>(op).name;
  const std::optional<int64_t> expected =
      is_put ? std::get<PutJob>(op).expected_version : std::get<DeleteJob>(op).expected_version;
  absl::StatusOr<std::optional<int64_t>> current = VersionLocked(name);
  if (!current.ok()) return current.status();
  if (expected.has_value() && current->value_or(kAbsent) != *expected) {
    return VersionConflictError(name, *expected, *current);
  }
  const int64_t version = current->value_or(kAbsent) + 1;
  if (is_put) {
    const JobRow& row = std::get<PutJob>(op).row;
    StatementUse use(put);
    sqlite3_stmt* s = put.get();
    // SQLITE_STATIC: the row outlives the step, and StatementUse unbinds it.
    int rc =
        sqlite3_bind_text64(s, 1, row.name.data(), row.name.size(), SQLITE_STATIC, SQLITE_UTF8);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int64(s, 2, row.creation_time_us);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int64(s, 3, row.last_modified_us);
    if (rc == SQLITE_OK) {
      rc = sqlite3_bind_text64(s, 4, row.status.data(), row.status.size(), SQLITE_STATIC,
                               SQLITE_UTF8);
    }
    // data() is never null, so an empty record binds as an empty blob, not
    // as NULL (which the NOT NULL column would refuse).
    if (rc == SQLITE_OK) {
      rc = sqlite3_bind_blob64(s, 5, row.record.data(), row.record.size(), SQLITE_STATIC);
    }
    if (rc == SQLITE_OK) rc = sqlite3_bind_int64(s, 6, version);
    if (rc == SQLITE_OK) rc = sqlite3_step(s);
    if (rc != SQLITE_DONE) return Error(rc, absl::StrCat("writing job '", row.name, "'"));
  } else {
    if (!current->has_value()) {  // Nothing to delete: no change.
      result.sequences.push_back(0);
      result.versions.push_back(kAbsent);
      return absl::OkStatus();
    }
    StatementUse use(remove);
    int rc =
        sqlite3_bind_text64(remove.get(), 1, name.data(), name.size(), SQLITE_STATIC, SQLITE_UTF8);
    if (rc == SQLITE_OK) rc = sqlite3_step(remove.get());
    if (rc != SQLITE_DONE) return Error(rc, absl::StrCat("deleting job '", name, "'"));
  }
  ++*sequence;
  if (absl::Status recorded = RecordChangeLocked(*sequence, name, version,
                                                 is_put ? &std::get<PutJob>(op).row : nullptr);
      !recorded.ok()) {
    return recorded;
  }
  result.sequences.push_back(*sequence);
  result.versions.push_back(version);
  return absl::OkStatus();
}

void SqliteStorage::Impl::RollBackLocked() {
  // Some errors (SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM, ...) already rolled
  // the transaction back; a ROLLBACK without one would fail.
  if (sqlite3_get_autocommit(db.get())) return;
  if (absl::Status s = Run(rollback, "rolling back a failed transaction"); !s.ok()) {
    spdlog::error("{}", s.ToString());
  }
}

absl::Status SqliteStorage::Impl::ReadPageLocked(const std::string* after,
                                                 std::vector<JobRow>& rows) {
  const Statement& scan = after == nullptr ? scan_first : scan_after;
  StatementUse use(scan);
  sqlite3_stmt* s = scan.get();
  int rc = SQLITE_OK;
  if (after != nullptr) {
    rc = sqlite3_bind_text64(s, 1, after->data(), after->size(), SQLITE_STATIC, SQLITE_UTF8);
  }
  if (rc == SQLITE_OK) rc = sqlite3_bind_int(s, after == nullptr ? 1 : 2, kScanPageRows);
  if (rc != SQLITE_OK) return Error(rc, "reading jobs");
  auto column = [s](int i) { return ColumnBytes(s, i); };
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    JobRow& row = rows.emplace_back();
    row.name = column(0);
    row.creation_time_us = sqlite3_column_int64(s, 1);
    row.last_modified_us = sqlite3_column_int64(s, 2);
    row.status = column(3);
    row.record = column(4);
    row.version = sqlite3_column_int64(s, 5);
  }
  if (rc != SQLITE_DONE) return Error(rc, "reading jobs");
  return absl::OkStatus();
}

absl::Status SqliteStorage::CreateDatabase(const std::string& path) {
  // Built under a temporary name, closed (its WAL folded in), synced, then
  // renamed: the database's name never stands for a half-made file, whatever
  // kills the process when.
  const std::string temporary = path + ".creating";
  for (const char* suffix : {"", "-wal", "-shm"}) unlink((temporary + suffix).c_str());
  {
    auto impl = std::make_unique<Impl>(temporary, /*create=*/true);
    absl::MutexLock lock(&impl->mu);
    if (absl::Status opened = impl->OpenLocked(); !opened.ok()) return opened;
  }
  if (absl::Status synced = SyncPath(temporary, /*directory=*/false); !synced.ok()) return synced;
  if (rename(temporary.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot rename ", temporary, " to ", path, ": ",
                                               std::generic_category().message(errno)));
  }
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return SyncPath(parent.empty() ? "." : parent, /*directory=*/true);
}

absl::StatusOr<std::unique_ptr<SqliteStorage>> SqliteStorage::Open(const std::string& path) {
  struct stat file = {};
  if (stat(path.c_str(), &file) != 0) {
    if (errno != ENOENT) {
      return absl::UnavailableError(absl::StrCat("sqlite database '", path, "': cannot read it (",
                                                 std::generic_category().message(errno), ")"));
    }
    if (absl::Status created = CreateDatabase(path); !created.ok()) return created;
    spdlog::info("sqlite database '{}': created", path);
  } else if (S_ISREG(file.st_mode) && file.st_size == 0) {
    return HalfMadeError(path, "is empty (0 bytes)");
  }
  auto impl = std::make_unique<Impl>(path, /*create=*/false);
  {
    absl::MutexLock lock(&impl->mu);
    if (absl::Status opened = impl->OpenLocked(); !opened.ok()) return opened;
  }
  return std::unique_ptr<SqliteStorage>(new SqliteStorage(std::move(impl)));
}

SqliteStorage::SqliteStorage(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SqliteStorage::~SqliteStorage() = default;

absl::Status SqliteStorage::Write(const WriteBatch& batch) {
  return WriteAndReport(batch).status();
}

absl::StatusOr<WriteResult> SqliteStorage::WriteAndReport(const WriteBatch& batch) {
  if (batch.empty()) return WriteResult{};
  absl::MutexLock lock(&impl_->mu);
  return impl_->WriteLocked(batch);
}

absl::StatusOr<std::optional<JobRow>> SqliteStorage::ReadJob(const std::string& name) {
  absl::MutexLock lock(&impl_->mu);
  const Statement& read = impl_->read_job;
  StatementUse use(read);
  sqlite3_stmt* s = read.get();
  int rc = sqlite3_bind_text64(s, 1, name.data(), name.size(), SQLITE_STATIC, SQLITE_UTF8);
  if (rc == SQLITE_OK) rc = sqlite3_step(s);
  if (rc == SQLITE_DONE) return std::nullopt;
  if (rc != SQLITE_ROW) return impl_->Error(rc, absl::StrCat("reading job '", name, "'"));
  JobRow row;
  row.name = ColumnBytes(s, 0);
  row.creation_time_us = sqlite3_column_int64(s, 1);
  row.last_modified_us = sqlite3_column_int64(s, 2);
  row.status = ColumnBytes(s, 3);
  row.record = ColumnBytes(s, 4);
  row.version = sqlite3_column_int64(s, 5);
  return row;
}

absl::StatusOr<std::vector<JobChange>> SqliteStorage::ReadChangesAfter(int64_t after, int limit) {
  absl::MutexLock lock(&impl_->mu);
  const Statement& read = impl_->changes_after;
  StatementUse use(read);
  sqlite3_stmt* s = read.get();
  int rc = sqlite3_bind_int64(s, 1, after);
  if (rc == SQLITE_OK) rc = sqlite3_bind_int(s, 2, limit);
  if (rc != SQLITE_OK) return impl_->Error(rc, "reading the change feed");
  std::vector<JobChange> changes;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    JobChange& change = changes.emplace_back();
    change.sequence = sqlite3_column_int64(s, 0);
    change.name = ColumnBytes(s, 1);
    change.version = sqlite3_column_int64(s, 2);
    change.deleted = sqlite3_column_int(s, 3) != 0;
    if (change.deleted) continue;
    change.row.name = change.name;
    change.row.creation_time_us = sqlite3_column_int64(s, 4);
    change.row.last_modified_us = sqlite3_column_int64(s, 5);
    change.row.status = ColumnBytes(s, 6);
    change.row.record = ColumnBytes(s, 7);
    change.row.version = change.version;
  }
  if (rc != SQLITE_DONE) return impl_->Error(rc, "reading the change feed");
  return changes;
}

absl::StatusOr<int64_t> SqliteStorage::PruneChanges(int64_t modified_before_us, int limit) {
  absl::MutexLock lock(&impl_->mu);
  if (!sqlite3_get_autocommit(impl_->db.get())) impl_->RollBackLocked();
  if (absl::Status s = impl_->Run(impl_->begin, "starting to prune the change feed"); !s.ok()) {
    return s;
  }
  int64_t pruned = 0;
  absl::Status done;
  {
    const Statement& prune = impl_->prune_changes;
    StatementUse use(prune);
    int rc = sqlite3_bind_int64(prune.get(), 1, modified_before_us);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int(prune.get(), 2, limit);
    if (rc == SQLITE_OK) rc = sqlite3_step(prune.get());
    if (rc == SQLITE_DONE) {
      pruned = sqlite3_changes(impl_->db.get());
    } else {
      done = impl_->Error(rc, "pruning the change feed");
    }
  }
  if (done.ok()) done = impl_->Run(impl_->commit, "committing the change feed's pruning");
  if (!done.ok()) {
    impl_->RollBackLocked();
    return done;
  }
  return pruned;
}

absl::StatusOr<int64_t> SqliteStorage::LatestChangeSequence() {
  absl::MutexLock lock(&impl_->mu);
  return impl_->LatestSequenceLocked();
}

absl::Status SqliteStorage::ForEachJob(const std::function<absl::Status(const JobRow&)>& visit) {
  std::vector<JobRow> page;
  std::string after;
  for (bool first = true;; first = false) {
    page.clear();
    {
      absl::MutexLock lock(&impl_->mu);
      if (absl::Status read = impl_->ReadPageLocked(first ? nullptr : &after, page); !read.ok()) {
        return read;
      }
    }
    for (const JobRow& row : page) {
      if (absl::Status visited = visit(row); !visited.ok()) return visited;
    }
    if (page.size() < kScanPageRows) return absl::OkStatus();
    after = std::move(page.back().name);
  }
}

int SqliteStorage::schema_version() const { return impl_->schema_version; }

}  // namespace debugplane::persistence
