#include "persistence/postgres/postgres_storage.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "persistence/lease_fence.h"
#include "persistence/postgres/postgres_change_listener.h"
#include "persistence/postgres/postgres_put_runs.h"
#include "spdlog/spdlog.h"

namespace debugplane::persistence {
namespace {

// Rows ForEachJob reads per statement: bounds its memory, and `visit` runs
// between pages with no connection held.
constexpr int kScanPageRows = 256;

// Parameter types (pg_type OIDs).

// Puts without, with kAbsent, and with another expected version; deletes
// without and with one. Each statement that changes a row also records the
// change under the next change sequence number, in one round trip.
constexpr char kPutAny[] = "dp_put_job";
constexpr char kPutNew[] = "dp_put_new_job";
constexpr char kPutIf[] = "dp_put_job_if";
constexpr char kDeleteAny[] = "dp_delete_job";
constexpr char kDeleteIf[] = "dp_delete_job_if";
constexpr char kVersionOf[] = "dp_job_version";
constexpr char kReadJob[] = "dp_read_job";
constexpr char kCheckLease[] = "dp_check_lease";
constexpr char kScanFirst[] = "dp_scan_jobs_first";
constexpr char kScanAfter[] = "dp_scan_jobs_after";
constexpr char kChangesAfter[] = "dp_changes_after";
constexpr char kLatestSequence[] = "dp_latest_sequence";
constexpr char kPutPresence[] = "dp_put_agent_presence";
constexpr char kReadPresence[] = "dp_read_agent_presence";
constexpr char kPruneChanges[] = "dp_prune_changes";

// Takes the next change sequence number for the row `changed` returned
// (none if it returned none) and records the change; returns its sequence
// number and version. `values` are the job_changes columns after sequence.
std::string RecordingChange(const char* changed, const char* values) {
  return absl::StrCat("WITH changed AS (", changed,
                      "), next AS (UPDATE change_sequence SET last = last + 1 "
                      "WHERE EXISTS (SELECT 1 FROM changed) RETURNING last) "
                      "INSERT INTO job_changes (sequence, name, version, deleted, "
                      "creation_time_us, last_modified_us, status, record) "
                      "SELECT next.last, ",
                      values, " FROM changed, next RETURNING sequence, version");
}

static_assert(kPostgresSchemaVersion >= 1);

absl::Status PrepareStatements(PostgresConnection& connection) {
  constexpr char kRowValues[] = "$1, changed.version, false, $2, $3, $4, $5";
  constexpr char kTombstoneValues[] = "$1, changed.version + 1, true, 0, 0, '', ''::bytea";
  const std::vector<Oid> row_types = {kTextOid, kInt8Oid, kInt8Oid, kTextOid, kByteaOid};
  const std::vector<Oid> row_if_types = {kTextOid, kInt8Oid,  kInt8Oid,
                                         kTextOid, kByteaOid, kInt8Oid};
  std::vector<PgStatement> statements = PutRunStatements();
  statements.insert(statements.end(), {
      // FOR SHARE: a takeover (an UPDATE of the row) waits until this batch
      // commits or rolls back, so a batch that passed the check is never
      // applied after the lease changed hands.
      {kCheckLease,
       "SELECT owner, token FROM job_leases WHERE job_name = $1 FOR SHARE",
       {kTextOid}},
      {kPutAny,
       RecordingChange(
           "INSERT INTO training_jobs AS t (name, creation_time_us, last_modified_us, status, "
           "record, version) VALUES ($1, $2, $3, $4, $5, 1) "
           "ON CONFLICT (name) DO UPDATE SET creation_time_us = excluded.creation_time_us, "
           "last_modified_us = excluded.last_modified_us, status = excluded.status, "
           "record = excluded.record, version = t.version + 1 RETURNING t.version",
           kRowValues),
       row_types},
      {kPutNew,
       RecordingChange(
           "INSERT INTO training_jobs (name, creation_time_us, last_modified_us, status, record, "
           "version) VALUES ($1, $2, $3, $4, $5, 1) ON CONFLICT (name) DO NOTHING "
           "RETURNING version",
           kRowValues),
       row_types},
      {kPutIf,
       RecordingChange("UPDATE training_jobs SET creation_time_us = $2, last_modified_us = $3, "
                       "status = $4, record = $5, version = version + 1 "
                       "WHERE name = $1 AND version = $6 RETURNING version",
                       kRowValues),
       row_if_types},
      {kDeleteAny,
       RecordingChange("DELETE FROM training_jobs WHERE name = $1 RETURNING version",
                       kTombstoneValues),
       {kTextOid}},
      {kDeleteIf,
       RecordingChange(
           "DELETE FROM training_jobs WHERE name = $1 AND version = $2 RETURNING version",
           kTombstoneValues),
       {kTextOid, kInt8Oid}},
      {kVersionOf, "SELECT version FROM training_jobs WHERE name = $1", {kTextOid}},
      {kReadJob,
       "SELECT name, creation_time_us, last_modified_us, status, record, version "
       "FROM training_jobs WHERE name = $1",
       {kTextOid}},
      {kScanFirst,
       "SELECT name, creation_time_us, last_modified_us, status, record, version "
       "FROM training_jobs ORDER BY name COLLATE \"C\" LIMIT $1",
       {kInt8Oid}},
      {kScanAfter,
       "SELECT name, creation_time_us, last_modified_us, status, record, version "
       "FROM training_jobs WHERE name COLLATE \"C\" > $1 ORDER BY name COLLATE \"C\" LIMIT $2",
       {kTextOid, kInt8Oid}},
      {kChangesAfter,
       "SELECT sequence, name, version, deleted, creation_time_us, last_modified_us, status, "
       "record FROM job_changes WHERE sequence > $1 ORDER BY sequence LIMIT $2",
       {kInt8Oid, kInt8Oid}},
      {kLatestSequence, "SELECT last FROM change_sequence", {}},
      // Storage::PruneChanges: superseded changes (job_changes_by_name finds
      // the later one) last modified before $1, oldest first, at most $2.
      {kPruneChanges,
       "DELETE FROM job_changes WHERE sequence IN (SELECT c.sequence FROM job_changes c "
       "WHERE c.last_modified_us < $1 AND EXISTS (SELECT 1 FROM job_changes n "
       "WHERE n.name = c.name AND n.sequence > c.sequence) ORDER BY c.sequence LIMIT $2)",
       {kInt8Oid, kInt8Oid}},
      {kPutPresence,
       "INSERT INTO agent_presence (job_name, replica_id, agents, heartbeat_us, absent_since_us) "
       "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (job_name, replica_id) DO UPDATE SET "
       "agents = excluded.agents, heartbeat_us = excluded.heartbeat_us, "
       "absent_since_us = excluded.absent_since_us",
       {kTextOid, kTextOid, kInt8Oid, kInt8Oid, kInt8Oid}},
      {kReadPresence,
       "SELECT replica_id, agents::bigint, heartbeat_us, absent_since_us FROM agent_presence "
       "WHERE job_name = $1",
       {kTextOid}},
  });
  return PrepareAll(connection, statements);
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
  for (const SchemaMigration& step : PostgresMigrations()) {
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
  return WriteAndReport(batch).status();
}

absl::StatusOr<WriteResult> PostgresStorage::WriteAndReport(const WriteBatch& batch) {
  if (batch.empty()) return WriteResult{};
  for (int attempt = 0;; ++attempt) {
    auto lease = pool_.Acquire();
    if (!lease.ok()) return lease.status();
    WriteProgress progress;
    WriteResult result;
    absl::Status written = WriteOn(**lease, batch, /*by_runs=*/true, progress, result);
    if (!written.ok() && progress.failed_in_run && !(**lease).broken()) {
      // A statement writing several rows failed (rolled back): the batch
      // goes again one statement per operation, which names the operation
      // the server refuses (or commits, if the failure was transient).
      spdlog::debug("{}; writing the batch again one row at a time", written.ToString());
      progress = WriteProgress();
      result = WriteResult();
      written = WriteOn(**lease, batch, /*by_runs=*/false, progress, result);
    }
    // A pooled connection that the server closed since its last use (a
    // restart) fails before the transaction begins: nothing was sent, so the
    // batch goes once more, on a new connection.
    if (!written.ok() && !progress.began && !lease->fresh() && (**lease).broken() &&
        attempt == 0) {
      pool_.DropIdle();
      continue;
    }
    if (!written.ok()) return written;
    return result;
  }
}

namespace {

// The end of the message of a write that failed before it committed.
constexpr absl::string_view kNothingApplied = "; no write of the batch was applied";

// " (operation 2 of 5); no write of the batch was applied".
std::string NothingAppliedAt(size_t index, size_t count) {
  return absl::StrCat(" (operation ", index + 1, " of ", count, ")", kNothingApplied);
}

// The name of the job operation `op` is about, and the version it expects.
const std::string& JobOf(const WriteOp& op) {
  if (const auto* put = std::get_if<PutJob>(&op)) return put->row.name;
  if (const auto* remove = std::get_if<DeleteJob>(&op)) return remove->name;
  return std::get<CheckLease>(op).job_name;
}

std::optional<int64_t> ExpectedOf(const WriteOp& op) {
  if (const auto* put = std::get_if<PutJob>(&op)) return put->expected_version;
  if (const auto* remove = std::get_if<DeleteJob>(&op)) return remove->expected_version;
  return std::nullopt;
}

// What operation `op` does, for its errors: built only when one fails.
std::string Doing(const WriteOp& op) {
  const char* verb = std::holds_alternative<PutJob>(op)      ? "writing job '"
                     : std::holds_alternative<DeleteJob>(op) ? "deleting job '"
                                                             : "checking the lease of job '";
  return absl::StrCat(verb, JobOf(op), "'");
}

// What one statement of a batch's pipeline carries: operations
// [first, first + count) of the batch; more than one if `run` (PutRun).
struct SentOps {
  size_t first = 0;
  size_t count = 1;
  bool run = false;
};

// What the statement of `sent` does, for its errors: "writing jobs 'a',
// 'b' (operations 3 to 4 of 9)", or Doing() of its one operation.
std::string Doing(const WriteBatch& batch, const SentOps& sent) {
  if (!sent.run) return Doing(batch.ops()[sent.first]);
  constexpr size_t kNamed = 8;
  std::string doing = "writing jobs ";
  for (size_t i = 0; i < std::min(sent.count, kNamed); ++i) {
    absl::StrAppend(&doing, i > 0 ? ", '" : "'", JobOf(batch.ops()[sent.first + i]), "'");
  }
  if (sent.count > kNamed) absl::StrAppend(&doing, " and ", sent.count - kNamed, " more");
  absl::StrAppend(&doing, " in one statement");
  return doing;
}

// " (operations 3 to 4 of 9); no write of the batch was applied".
std::string NothingAppliedIn(const SentOps& sent, size_t count) {
  if (sent.count == 1) return NothingAppliedAt(sent.first, count);
  return absl::StrCat(" (operations ", sent.first + 1, " to ", sent.first + sent.count, " of ",
                      count, ")", kNothingApplied);
}

// Queues operation `op`'s statement on `pipeline`: the lease row read FOR
// SHARE for a fence; for a put or delete, the statement that changes the row
// and records the change (one row back, the change's sequence and version,
// when it changed a row).
void QueueOperation(PgPipeline& pipeline, const WriteOp& op) {
  const std::string& name = JobOf(op);
  const PgParam name_param = {name.data(), static_cast<int>(name.size())};
  const std::optional<int64_t> expected = ExpectedOf(op);
  const std::string version = PgInt8(expected.value_or(0));
  if (std::holds_alternative<CheckLease>(op)) {
    pipeline.SendPrepared(kCheckLease, std::span<const PgParam>(&name_param, 1));
    return;
  }
  if (std::holds_alternative<DeleteJob>(op)) {
    const PgParam params[] = {name_param, {version.data(), 8}};
    pipeline.SendPrepared(expected.has_value() ? kDeleteIf : kDeleteAny,
                          std::span<const PgParam>(params, expected.has_value() ? 2 : 1));
    return;
  }
  const JobRow& row = std::get<PutJob>(op).row;
  const std::string created = PgInt8(row.creation_time_us);
  const std::string modified = PgInt8(row.last_modified_us);
  const PgParam params[] = {name_param,
                            {created.data(), 8},
                            {modified.data(), 8},
                            {row.status.data(), static_cast<int>(row.status.size())},
                            {row.record.data(), static_cast<int>(row.record.size())},
                            {version.data(), 8}};
  const char* statement = !expected.has_value()  ? kPutAny
                          : *expected == kAbsent ? kPutNew
                                                 : kPutIf;
  pipeline.SendPrepared(statement, std::span<const PgParam>(params, statement == kPutIf ? 6 : 5));
}

// The lease row a fence's statement returned, checked (lease_fence.h):
// FAILED_PRECONDITION if the fence is stale.
absl::Status CheckFenceIn(const PGresult* found_row, const CheckLease& fence) {
  std::optional<FoundLease> found;
  if (PQntuples(found_row) > 0) {
    found = FoundLease{.owner = PgBytes(found_row, 0, 0), .token = PgInt64(found_row, 0, 1)};
  }
  return CheckFence(fence, found);
}

}  // namespace

absl::Status PostgresStorage::WriteOn(PostgresConnection& connection, const WriteBatch& batch,
                                      bool by_runs, WriteProgress& progress,
                                      WriteResult& result) {
  // The whole batch goes in one round trip (libpq's pipeline mode); COMMIT
  // follows only once every result was checked (CommitOn). First the
  // transaction id, to learn the outcome if the connection is lost in
  // COMMIT; and the change sequence counter's row lock, which orders this
  // transaction's sequence numbers (and commit) after every transaction
  // that took numbers before it, across servers (see the v2 migration).
  // Taken first, it also orders writers so that they cannot deadlock on
  // each other's job rows, and lease rows (FOR SHARE) after it.
  std::vector<SentOps> sent;
  std::vector<PgResult> results;
  {
    PgPipeline pipeline(connection);
    pipeline.Send("BEGIN");
    pipeline.Send("SELECT txid_current(), last FROM change_sequence FOR UPDATE");
    for (size_t i = 0; i < batch.size(); i += sent.back().count) {
      if (by_runs && std::holds_alternative<PutJob>(batch.ops()[i])) {
        const PutRun run = PutRunAt(batch, i);
        QueuePutRun(pipeline, batch, run);
        sent.push_back({.first = i, .count = run.count, .run = true});
      } else {
        QueueOperation(pipeline, batch.ops()[i]);
        sent.push_back({.first = i});
      }
    }
    results = pipeline.Run();
  }
  absl::Status begun = connection.ResultStatus(results[0].get(), "starting a write transaction");
  if (begun.ok()) {
    begun = connection.ResultStatus(results[1].get(), "starting a write transaction");
  }
  if (!begun.ok()) {
    RollBack(connection);
    return WithContext(begun, kNothingApplied);
  }
  const std::string txid = PQgetvalue(results[1].get(), 0, 0);
  progress.began = true;
  bool changed_any = false;
  for (size_t s = 0; s < sent.size(); ++s) {
    const PGresult* written = results[s + 2].get();
    if (absl::Status status = connection.ResultStatus(written, ""); !status.ok()) {
      // The message again, naming the operations: built only now.
      status = connection.ResultStatus(written, Doing(batch, sent[s]));
      progress.failed_in_run = sent[s].run;
      RollBack(connection);
      return WithContext(status, NothingAppliedIn(sent[s], batch.size()));
    }
    for (size_t row = 0; row < sent[s].count; ++row) {
      if (absl::Status taken = TakeResult(connection, batch.ops()[sent[s].first + row], written,
                                          sent[s].run ? row : 0, changed_any, result);
          !taken.ok()) {
        return taken;
      }
    }
  }
  return CommitOn(connection, changed_any, txid, batch);
}

absl::Status PostgresStorage::TakeResult(PostgresConnection& connection, const WriteOp& op,
                                         const PGresult* written, size_t row, bool& changed_any,
                                         WriteResult& result) {
  if (const auto* fence = std::get_if<CheckLease>(&op)) {
    if (absl::Status checked = CheckFenceIn(written, *fence); !checked.ok()) {
      RollBack(connection);
      return checked;
    }
    result.sequences.push_back(0);  // A check changes nothing.
    result.versions.push_back(0);
  } else if (static_cast<int>(row) < PQntuples(written) && !PQgetisnull(written, row, 0)) {
    result.sequences.push_back(PgInt64(written, row, 0));
    result.versions.push_back(PgInt64(written, row, 1));
    changed_any = true;
  } else if (!ExpectedOf(op).has_value()) {  // A delete of a missing row: no change.
    result.sequences.push_back(0);
    result.versions.push_back(kAbsent);
  } else {
    return VersionConflict(connection, JobOf(op), *ExpectedOf(op));
  }
  return absl::OkStatus();
}

absl::Status PostgresStorage::CommitOn(PostgresConnection& connection, bool changed_any,
                                       const std::string& txid, const WriteBatch& batch) {
  // Listeners (SubscribeToChanges) hear of it once it commits.
  auto committed = connection.Exec(
      changed_any ? "NOTIFY " DP_POSTGRES_CHANGE_CHANNEL "; COMMIT" : "COMMIT", "committing");
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

absl::Status PostgresStorage::VersionConflict(PostgresConnection& connection,
                                              const std::string& name, int64_t expected) {
  // In the transaction, the row as this batch found it; if a later
  // statement of the pipeline failed, the transaction can no longer read:
  // the row as it is now, after the rollback.
  const bool in_transaction = PQtransactionStatus(connection.raw()) == PQTRANS_INTRANS;
  if (!in_transaction) RollBack(connection);
  const PgParam params[] = {{name.data(), static_cast<int>(name.size())}};
  auto current = connection.ExecPrepared(kVersionOf, params,
                                         absl::StrCat("reading the version of job '", name, "'"));
  if (in_transaction) RollBack(connection);
  if (!current.ok()) return current.status();
  std::optional<int64_t> actual;
  if (PQntuples(current->get()) == 1) actual = PgInt64(current->get(), 0, 0);
  return VersionConflictError(name, expected, actual);
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
      row.version = PgInt64(result, i, 5);
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

absl::StatusOr<PgResult> PostgresStorage::ReadOnly(const char* statement,
                                                   std::span<const PgParam> params,
                                                   absl::string_view doing) {
  // A read changes nothing: on a connection cut since its last use, once more.
  return pool_.ExecPreparedOnce(statement, params, doing);
}

absl::StatusOr<std::optional<JobRow>> PostgresStorage::ReadJob(const std::string& name) {
  const PgParam params[] = {{name.data(), static_cast<int>(name.size())}};
  auto result = ReadOnly(kReadJob, params, absl::StrCat("reading job '", name, "'"));
  if (!result.ok()) return result.status();
  if (PQntuples(result->get()) == 0) return std::nullopt;
  const PGresult* r = result->get();
  JobRow row;
  row.name = PgBytes(r, 0, 0);
  row.creation_time_us = PgInt64(r, 0, 1);
  row.last_modified_us = PgInt64(r, 0, 2);
  row.status = PgBytes(r, 0, 3);
  row.record = PgBytes(r, 0, 4);
  row.version = PgInt64(r, 0, 5);
  return row;
}

absl::StatusOr<std::vector<JobChange>> PostgresStorage::ReadChangesAfter(int64_t after, int limit) {
  const std::string from = PgInt8(after);
  const std::string count = PgInt8(limit);
  const PgParam params[] = {{from.data(), 8}, {count.data(), 8}};
  auto result = ReadOnly(kChangesAfter, params, "reading the change feed");
  if (!result.ok()) return result.status();
  const PGresult* r = result->get();
  std::vector<JobChange> changes;
  changes.reserve(PQntuples(r));
  for (int i = 0; i < PQntuples(r); ++i) {
    JobChange& change = changes.emplace_back();
    change.sequence = PgInt64(r, i, 0);
    change.name = PgBytes(r, i, 1);
    change.version = PgInt64(r, i, 2);
    change.deleted = PQgetlength(r, i, 3) == 1 && PQgetvalue(r, i, 3)[0] != 0;
    if (change.deleted) continue;
    change.row.name = change.name;
    change.row.creation_time_us = PgInt64(r, i, 4);
    change.row.last_modified_us = PgInt64(r, i, 5);
    change.row.status = PgBytes(r, i, 6);
    change.row.record = PgBytes(r, i, 7);
    change.row.version = change.version;
  }
  return changes;
}

absl::StatusOr<int64_t> PostgresStorage::LatestChangeSequence() {
  auto result = ReadOnly(kLatestSequence, {}, "reading the change sequence");
  if (!result.ok()) return result.status();
  return PgInt64(result->get(), 0, 0);
}

absl::StatusOr<int64_t> PostgresStorage::PruneChanges(int64_t modified_before_us, int limit) {
  const std::string before = PgInt8(modified_before_us);
  const std::string count = PgInt8(limit);
  const PgParam params[] = {{before.data(), 8}, {count.data(), 8}};
  // One statement in autocommit: it takes no lock the writers wait for
  // (they lock the sequence counter and insert newer rows). Again once on a
  // new connection if the pooled one was cut: deleting superseded rows
  // twice is harmless.
  auto result = pool_.ExecPreparedOnce(kPruneChanges, params, "pruning the change feed");
  if (!result.ok()) return result.status();
  int64_t pruned = 0;
  if (!absl::SimpleAtoi(PQcmdTuples(result->get()), &pruned)) pruned = 0;
  return pruned;
}

absl::Status PostgresStorage::PutAgentPresence(const std::vector<AgentPresenceRow>& rows) {
  if (rows.empty()) return absl::OkStatus();
  auto lease = pool_.Acquire();
  if (!lease.ok()) return lease.status();
  // One statement each, in autocommit: rows are independent.
  for (const AgentPresenceRow& row : rows) {
    const std::string agents = PgInt8(row.agents);
    const std::string heartbeat = PgInt8(row.heartbeat_us);
    const std::string absent = PgInt8(row.absent_since_us);
    const PgParam params[] = {{row.job_name.data(), static_cast<int>(row.job_name.size())},
                              {row.replica_id.data(), static_cast<int>(row.replica_id.size())},
                              {agents.data(), 8},
                              {heartbeat.data(), 8},
                              {absent.data(), 8}};
    auto put = (**lease).ExecPrepared(
        kPutPresence, params, absl::StrCat("recording the agents of job '", row.job_name, "'"));
    if (!put.ok()) return put.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<AgentPresenceRow>> PostgresStorage::ReadAgentPresence(
    const std::string& job_name) {
  const PgParam params[] = {{job_name.data(), static_cast<int>(job_name.size())}};
  auto result =
      ReadOnly(kReadPresence, params, absl::StrCat("reading the agents of job '", job_name, "'"));
  if (!result.ok()) return result.status();
  std::vector<AgentPresenceRow> rows;
  for (int i = 0; i < PQntuples(result->get()); ++i) {
    AgentPresenceRow& row = rows.emplace_back();
    row.job_name = job_name;
    row.replica_id = PgBytes(result->get(), i, 0);
    row.agents = static_cast<int>(PgInt64(result->get(), i, 1));
    row.heartbeat_us = PgInt64(result->get(), i, 2);
    row.absent_since_us = PgInt64(result->get(), i, 3);
  }
  return rows;
}

std::unique_ptr<ChangeSubscription> PostgresStorage::SubscribeToChanges(
    std::function<void()> wake) {
  return std::make_unique<PostgresChangeListener>(
      pool_.target(), PostgresConnectOptions{.connect_timeout = options_.connect_timeout},
      std::move(wake));
}

}  // namespace debugplane::persistence
