#include "persistence/postgres_storage.h"

#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "persistence/lease_fence.h"
#include "spdlog/spdlog.h"

namespace debugplane::persistence {
namespace {

// Rows ForEachJob reads per statement: bounds its memory, and `visit` runs
// between pages with no connection held.
constexpr int kScanPageRows = 256;

// Parameter types (pg_type OIDs).
constexpr Oid kByteaOid = 17;
constexpr Oid kInt8Oid = 20;
constexpr Oid kTextOid = 25;

constexpr char kPut[] = "dp_put_job";
constexpr char kDelete[] = "dp_delete_job";
constexpr char kCheckLease[] = "dp_check_lease";
constexpr char kScanFirst[] = "dp_scan_jobs_first";
constexpr char kScanAfter[] = "dp_scan_jobs_after";

static_assert(kPostgresSchemaVersion >= 1);

absl::Status PrepareStatements(PostgresConnection& connection) {
  struct Statement {
    const char* name;
    const char* sql;
    std::vector<Oid> types;
  };
  const Statement statements[] = {
      {kPut,
       "INSERT INTO training_jobs (name, creation_time_us, last_modified_us, status, record) "
       "VALUES ($1, $2, $3, $4, $5) "
       "ON CONFLICT (name) DO UPDATE SET creation_time_us = excluded.creation_time_us, "
       "last_modified_us = excluded.last_modified_us, status = excluded.status, "
       "record = excluded.record",
       {kTextOid, kInt8Oid, kInt8Oid, kTextOid, kByteaOid}},
      {kDelete, "DELETE FROM training_jobs WHERE name = $1", {kTextOid}},
      // FOR SHARE: a takeover (an UPDATE of the row) waits until this batch
      // commits or rolls back, so a batch that passed the check is never
      // applied after the lease changed hands.
      {kCheckLease,
       "SELECT owner, token FROM job_leases WHERE job_name = $1 FOR SHARE",
       {kTextOid}},
      {kScanFirst,
       "SELECT name, creation_time_us, last_modified_us, status, record FROM training_jobs "
       "ORDER BY name COLLATE \"C\" LIMIT $1",
       {kInt8Oid}},
      {kScanAfter,
       "SELECT name, creation_time_us, last_modified_us, status, record FROM training_jobs "
       "WHERE name COLLATE \"C\" > $1 ORDER BY name COLLATE \"C\" LIMIT $2",
       {kTextOid, kInt8Oid}},
  };
  for (const Statement& statement : statements) {
    if (absl::Status prepared =
            connection.Prepare(statement.name, statement.sql, statement.types,
                               absl::StrCat("preparing statement ", statement.name));
        !prepared.ok()) {
      return prepared;
    }
  }
  return absl::OkStatus();
}

// Ends a failed transaction; a connection where that fails is not reused
// (see PostgresConnection::reusable).
void RollBack(PostgresConnection& connection) {
  if (connection.broken()) return;
  if (auto rolled_back = connection.Exec("ROLLBACK", "rolling back"); !rolled_back.ok()) {
    spdlog::error("{}", rolled_back.status().ToString());
  }
}

absl::Status WithContext(const absl::Status& status, absl::string_view context) {
  return absl::Status(status.code(), absl::StrCat(status.message(), context));
}

absl::Status TooNewError(const PostgresTarget& target, int version) {
  return absl::FailedPreconditionError(absl::StrCat(
      "PostgreSQL database '", target.database, "' at ", target.address, " has schema version ",
      version, ", newer than the schema version ", kPostgresSchemaVersion,
      " this debugplane understands: it was written by a newer debugplane; run that version, "
      "or use another database"));
}

// Migrates inside one transaction that holds an advisory lock: servers
// opening the database at once wait for each other, and each then reads
// the version the previous one left. Returns the version after migration.
absl::StatusOr<int> MigrateLocked(PostgresConnection& connection) {
  const PostgresTarget& target = connection.target();
  auto version_row = connection.Exec(
      "BEGIN; "
      "SELECT pg_advisory_xact_lock(hashtext('debugplane schema migration')); "
      "CREATE TABLE IF NOT EXISTS schema_version ("
      "  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),"
      "  version integer NOT NULL); "
      "SELECT version FROM schema_version",
      "reading the schema version");
  if (!version_row.ok()) return version_row.status();
  int version = 0;
  if (PQntuples(version_row->get()) > 0 &&
      !absl::SimpleAtoi(PQgetvalue(version_row->get(), 0, 0), &version)) {
    return absl::InternalError(absl::StrCat("PostgreSQL at ", target.address,
                                            ": unreadable schema version '",
                                            PQgetvalue(version_row->get(), 0, 0), "'"));
  }
  if (version > kPostgresSchemaVersion) return TooNewError(target, version);
  if (version == kPostgresSchemaVersion) {
    RollBack(connection);  // Nothing to change.
    return version;
  }
  const int from_version = version;
  for (const PostgresMigration& step : PostgresMigrations()) {
    if (step.to_version <= version) continue;
    if (auto migrated = connection.Exec(
            step.sql, absl::StrCat("migrating to schema version ", step.to_version));
        !migrated.ok()) {
      return migrated.status();
    }
    version = step.to_version;
  }
  // The version is a constant of this program, not outside input.
  const std::string record_version =
      absl::StrCat("INSERT INTO schema_version (singleton, version) VALUES (true, ", version,
                   ") ON CONFLICT (singleton) DO UPDATE SET version = excluded.version; COMMIT");
  auto committed = connection.Exec(record_version.c_str(), "committing the schema migration");
  if (!committed.ok()) return committed.status();
  spdlog::info("PostgreSQL database '{}' at {}: migrated the schema from version {} to {}",
               target.database, target.address, from_version, version);
  return version;
}

absl::StatusOr<int> Migrate(PostgresConnection& connection) {
  absl::StatusOr<int> version = MigrateLocked(connection);
  if (!version.ok()) RollBack(connection);
  return version;
}

}  // namespace

PostgresStorage::PostgresStorage(PostgresTarget target, const PostgresStorageOptions& options)
    : options_(options),
      pool_(std::move(target),
            PostgresConnectOptions{.connect_timeout = options.connect_timeout,
                                   .io_timeout = options.io_timeout},
            options.pool_size, PrepareStatements) {}

PostgresStorage::~PostgresStorage() = default;

absl::StatusOr<std::unique_ptr<PostgresStorage>> PostgresStorage::Open(
    const std::string& conninfo, const PostgresStorageOptions& options) {
  if (options.pool_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("PostgreSQL pool size must be at least 1, not ", options.pool_size));
  }
  absl::StatusOr<PostgresTarget> target = ParsePostgresTarget(conninfo);
  if (!target.ok()) return target.status();
  absl::StatusOr<int> version;
  {
    auto connection = PostgresConnection::Connect(
        *target, PostgresConnectOptions{.connect_timeout = options.connect_timeout});
    if (!connection.ok()) return connection.status();
    version = Migrate(**connection);
    if (!version.ok()) return version.status();
  }
  auto storage = std::unique_ptr<PostgresStorage>(new PostgresStorage(*target, options));
  storage->schema_version_ = *version;
  {
    // Prepares the statements now: a problem shows at start, not at the
    // first write. The connection stays in the pool.
    auto lease = storage->pool_.Acquire();
    if (!lease.ok()) return lease.status();
  }
  return storage;
}

absl::Status PostgresStorage::Write(const WriteBatch& batch) {
  if (batch.empty()) return absl::OkStatus();
  for (int attempt = 0;; ++attempt) {
    auto lease = pool_.Acquire();
    if (!lease.ok()) return lease.status();
    bool began = false;
    absl::Status written = WriteOn(**lease, batch, &began);
    // A pooled connection that the server closed since its last use (a
    // restart) fails before the transaction begins: nothing was sent, so the
    // batch goes once more, on a new connection.
    if (!written.ok() && !began && !lease->fresh() && (**lease).broken() && attempt == 0) {
      pool_.DropIdle();
      continue;
    }
    return written;
  }
}

absl::Status PostgresStorage::WriteOn(PostgresConnection& connection, const WriteBatch& batch,
                                      bool* began) {
  constexpr absl::string_view kNothingApplied = "; no write of the batch was applied";
  // The transaction id, to learn the outcome if the connection is lost in
  // COMMIT; in the same round trip as BEGIN.
  auto begun = connection.Exec("BEGIN; SELECT txid_current()", "starting a write transaction");
  if (!begun.ok()) {
    RollBack(connection);
    return WithContext(begun.status(), kNothingApplied);
  }
  const std::string txid = PQgetvalue(begun->get(), 0, 0);
  *began = true;
  for (size_t i = 0; i < batch.size(); ++i) {
    absl::StatusOr<PgResult> applied;
    if (const auto* put = std::get_if<PutJob>(&batch.ops()[i])) {
      const JobRow& row = put->row;
      const std::string created = PgInt8(row.creation_time_us);
      const std::string modified = PgInt8(row.last_modified_us);
      const PgParam params[] = {{row.name.data(), static_cast<int>(row.name.size())},
                                {created.data(), 8},
                                {modified.data(), 8},
                                {row.status.data(), static_cast<int>(row.status.size())},
                                {row.record.data(), static_cast<int>(row.record.size())}};
      applied = connection.ExecPrepared(kPut, params, absl::StrCat("writing job '", row.name, "'"));
    } else if (const auto* fence = std::get_if<CheckLease>(&batch.ops()[i])) {
      const PgParam params[] = {{fence->job_name.data(), static_cast<int>(fence->job_name.size())}};
      applied = connection.ExecPrepared(
          kCheckLease, params, absl::StrCat("checking the lease of job '", fence->job_name, "'"));
      if (applied.ok()) {
        std::optional<FoundLease> found;
        if (PQntuples(applied->get()) > 0) {
          found = FoundLease{.owner = PgBytes(applied->get(), 0, 0),
                             .token = PgInt64(applied->get(), 0, 1)};
        }
        if (absl::Status fenced = CheckFence(*fence, found); !fenced.ok()) {
          RollBack(connection);
          return fenced;
        }
      }
    } else {
      const std::string& name = std::get<DeleteJob>(batch.ops()[i]).name;
      const PgParam params[] = {{name.data(), static_cast<int>(name.size())}};
      applied = connection.ExecPrepared(kDelete, params, absl::StrCat("deleting job '", name, "'"));
    }
    if (!applied.ok()) {
      RollBack(connection);
      return WithContext(applied.status(), absl::StrCat(" (operation ", i + 1, " of ", batch.size(),
                                                        ")", kNothingApplied));
    }
  }
  auto committed = connection.Exec("COMMIT", "committing");
  if (!committed.ok()) {
    if (connection.broken()) return ResolveCommit(txid, batch);
    RollBack(connection);
    return WithContext(committed.status(), kNothingApplied);
  }
  // COMMIT of a transaction that failed reports ROLLBACK, not an error.
  if (absl::string_view(PQcmdStatus(committed->get())) != "COMMIT") {
    return absl::InternalError(absl::StrCat("PostgreSQL at ", pool_.target().address,
                                            ": the transaction was rolled back", kNothingApplied));
  }
  return absl::OkStatus();
}

absl::Status PostgresStorage::ResolveCommit(const std::string& txid, const WriteBatch& batch) {
  const PostgresTarget& target = pool_.target();
  const std::string lost = absl::StrCat("PostgreSQL at ", target.address,
                                        ": the connection was lost while committing a batch of ",
                                        batch.size(), " writes");
  int64_t id = 0;
  if (!absl::SimpleAtoi(txid, &id)) {
    return absl::UnavailableError(absl::StrCat(lost, "; whether it was applied is unknown"));
  }
  auto connection = PostgresConnection::Connect(
      target, PostgresConnectOptions{.connect_timeout = options_.connect_timeout});
  absl::StatusOr<PgResult> outcome = connection.status();
  if (connection.ok()) {
    // `id` is an integer formatted here, not outside text.
    const std::string query = absl::StrCat("SELECT txid_status(", id, ")");
    outcome = (*connection)->Exec(query.c_str(), "asking whether the batch committed");
  }
  if (!outcome.ok()) {
    return absl::UnavailableError(
        absl::StrCat(lost,
                     "; the server cannot be asked whether it was applied, so it may or may not "
                     "have been (",
                     outcome.status().message(), ")"));
  }
  const std::string status = PQgetisnull(outcome->get(), 0, 0) != 0
                                 ? "aborted"  // Too old to know: not committed by now.
                                 : std::string(PQgetvalue(outcome->get(), 0, 0));
  if (status == "committed") {
    spdlog::warn("{}; it was committed (transaction {})", lost, id);
    return absl::OkStatus();
  }
  if (status == "aborted") {
    return absl::UnavailableError(absl::StrCat(lost, "; no write of the batch was applied"));
  }
  return absl::UnavailableError(
      absl::StrCat(lost, "; its transaction is still ", status, ", so it may or may not commit"));
}

absl::Status PostgresStorage::ReadPage(const std::string* after, std::vector<JobRow>& rows) {
  const std::string limit = PgInt8(kScanPageRows);
  for (int attempt = 0;; ++attempt) {
    auto lease = pool_.Acquire();
    if (!lease.ok()) return lease.status();
    absl::StatusOr<PgResult> page;
    if (after == nullptr) {
      const PgParam params[] = {{limit.data(), 8}};
      page = (**lease).ExecPrepared(kScanFirst, params, "reading jobs");
    } else {
      const PgParam params[] = {{after->data(), static_cast<int>(after->size())},
                                {limit.data(), 8}};
      page = (**lease).ExecPrepared(kScanAfter, params, "reading jobs");
    }
    // A read changes nothing: on a connection cut since its last use, once more.
    if (!page.ok() && !lease->fresh() && (**lease).broken() && attempt == 0) {
      pool_.DropIdle();
      continue;
    }
    if (!page.ok()) return page.status();
    const PGresult* result = page->get();
    for (int i = 0; i < PQntuples(result); ++i) {
      JobRow& row = rows.emplace_back();
      row.name = PgBytes(result, i, 0);
      row.creation_time_us = PgInt64(result, i, 1);
      row.last_modified_us = PgInt64(result, i, 2);
      row.status = PgBytes(result, i, 3);
      row.record = PgBytes(result, i, 4);
    }
    return absl::OkStatus();
  }
}

absl::Status PostgresStorage::ForEachJob(const std::function<absl::Status(const JobRow&)>& visit) {
  std::vector<JobRow> page;
  std::string after;
  for (bool first = true;; first = false) {
    page.clear();
    if (absl::Status read = ReadPage(first ? nullptr : &after, page); !read.ok()) return read;
    for (const JobRow& row : page) {
      if (absl::Status visited = visit(row); !visited.ok()) return visited;
    }
    if (page.size() < kScanPageRows) return absl::OkStatus();
    after = std::move(page.back().name);
  }
}

}  // namespace debugplane::persistence
