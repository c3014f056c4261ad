// SqliteStorage's opening: creating a database whole, opening and
// configuring the connection, migrating the schema, preparing the
// statements, and closing (sqlite_storage.h).

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "persistence/sqlite/sqlite_migrations.h"
#include "persistence/sqlite/sqlite_storage.h"
#include "persistence/sqlite/sqlite_storage_impl.h"
#include "spdlog/spdlog.h"

namespace debugplane::persistence {
namespace sqlite_storage_internal {
namespace {

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

}  // namespace

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

}  // namespace sqlite_storage_internal

namespace {

using sqlite_storage_internal::Statement;
using sqlite_storage_internal::StatementUse;

// How long a statement waits for a lock held by another connection before it
// fails with SQLITE_BUSY. Only another connection to the same file competes
// (another process, or a second SqliteStorage): within one SqliteStorage the
// mutex serializes every call.
constexpr int kBusyTimeoutMs = 5000;

static_assert(kSqliteSchemaVersion >= 1);

// Storage::PruneChanges: superseded changes (a later one of the same job
// exists; job_changes_by_name finds it) last modified before ?1, oldest
// first, at most ?2.
constexpr char kPruneChangesSql[] =
    "DELETE FROM job_changes WHERE sequence IN (SELECT c.sequence FROM job_changes c "
    "WHERE c.last_modified_us < ?1 AND EXISTS (SELECT 1 FROM job_changes n "
    "WHERE n.name = c.name AND n.sequence > c.sequence) ORDER BY c.sequence LIMIT ?2)";

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

SqliteStorage::Impl::~Impl() {
  absl::MutexLock lock(&mu);
  // Before the final checkpoint below: no other connection in the log.
  if (checkpointer != nullptr) {
    checkpointer->Detach();
    checkpointer.reset();
  }
  // Statements first: a connection with live statements does not close.
  for (Statement* statement : {&begin, &commit, &rollback, &put, &remove, &check_lease, &scan_first,
                               &scan_after, &version_of, &read_job, &latest_sequence, &set_sequence,
                               &add_change, &changes_after, &prune_changes}) {
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
  if (absl::Status s = ConnectLocked(); !s.ok()) return s;
  // Refuse a newer or half-made database before changing anything in it
  // (switching to WAL rewrites its header).
  if (absl::Status s = CheckSchemaBeforeChangesLocked(); !s.ok()) return s;
  if (absl::Status s = UseWalLocked(); !s.ok()) return s;
  // The transaction statements first: migration uses them. The others name
  // the table, which only exists once migrated.
  const StatementSql transaction_statements[] = {
      {&begin, "BEGIN IMMEDIATE"}, {&commit, "COMMIT"}, {&rollback, "ROLLBACK"}};
  if (absl::Status s = PrepareAll(transaction_statements); !s.ok()) return s;
  if (absl::Status s = MigrateLocked(); !s.ok()) return s;
  if (absl::Status s = PrepareTableStatementsLocked(); !s.ok()) return s;
  open_complete = true;
  return absl::OkStatus();
}

absl::Status SqliteStorage::Impl::ConnectLocked() {
  sqlite3* raw = nullptr;
  // NOMUTEX: `mu` already serializes every use of the connection.
  const int rc = sqlite3_open_v2(
      path.c_str(), &raw,
      SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX, nullptr);
  db.reset(raw);  // Kept even on error: the handle carries the message and must be closed.
  if (rc != SQLITE_OK) return Error(rc, "opening");
  sqlite3_extended_result_codes(db.get(), 1);
  sqlite3_busy_timeout(db.get(), kBusyTimeoutMs);
  return Exec("PRAGMA foreign_keys = ON", "enabling foreign keys");
}

absl::Status SqliteStorage::Impl::CheckSchemaBeforeChangesLocked() {
  // This first read also finds a file that is not a database.
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
  return absl::OkStatus();
}

absl::Status SqliteStorage::Impl::UseWalLocked() {
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
  return Exec("PRAGMA synchronous = FULL", "setting synchronous=FULL");
}

absl::Status SqliteStorage::Impl::PrepareTableStatementsLocked() {
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
  return PrepareAll(table_statements);
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
  const std::span<const SchemaMigration> steps = SqliteMigrations();
  if (from_version < 0 || from_version >= static_cast<int>(steps.size()) ||
      steps[from_version].to_version != from_version + 1) {
    return absl::InternalError(absl::StrCat(
        "sqlite database '", path, "': no migration step from schema version ", from_version));
  }
  const SchemaMigration& step = steps[from_version];
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
    absl::StatusOr<std::unique_ptr<sqlite_storage_internal::WalCheckpointer>> checkpointer =
        sqlite_storage_internal::WalCheckpointer::Start(path, impl->db.get());
    if (!checkpointer.ok()) return checkpointer.status();
    impl->checkpointer = *std::move(checkpointer);
  }
  return std::unique_ptr<SqliteStorage>(new SqliteStorage(std::move(impl)));
}

SqliteStorage::SqliteStorage(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SqliteStorage::~SqliteStorage() = default;

int64_t SqliteStorage::wal_checkpoints() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->checkpointer == nullptr ? 0 : impl_->checkpointer->completed();
}

}  // namespace debugplane::persistence
