#include "persistence/postgres/postgres_connection.h"

#include <endian.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "spdlog/spdlog.h"

namespace debugplane::persistence {
namespace {

// libpq's compiled-in socket directory, used when no host is given.
constexpr char kDefaultSocketDir[] = "/var/run/postgresql";

struct ConninfoDeleter {
  void operator()(PQconninfoOption* options) const { PQconninfoFree(options); }
};
using Conninfo = std::unique_ptr<PQconninfoOption, ConninfoDeleter>;

std::string OptionValue(const PQconninfoOption* options, absl::string_view keyword) {
  for (const PQconninfoOption* option = options; option->keyword != nullptr; ++option) {
    if (keyword == option->keyword && option->val != nullptr) return option->val;
  }
  return "";
}

// A libpq message on one line: its lines joined, the final newline gone.
std::string OneLine(absl::string_view message) {
  std::string line = absl::StrReplaceAll(absl::StripTrailingAsciiWhitespace(message),
                                         {{"\n\t", " "}, {"\n", " "}});
  return line;
}

// What a failed connection attempt's message says went wrong.
absl::StatusCode ConnectErrorCode(absl::string_view message) {
  if (absl::StrContains(message, "password authentication failed") ||
      absl::StrContains(message, "no password supplied") ||
      absl::StrContains(message, "authentication failed for user") ||
      absl::StrContains(message, "no pg_hba.conf entry") ||
      (absl::StrContains(message, "role \"") && absl::StrContains(message, "does not exist"))) {
    return absl::StatusCode::kPermissionDenied;
  }
  if (absl::StrContains(message, "database \"") && absl::StrContains(message, "does not exist")) {
    return absl::StatusCode::kNotFound;
  }
  if (absl::StrContains(message, "SSL was required") ||
      absl::StrContains(message, "root certificate file") ||
      absl::StrContains(message, "certificate verify failed") ||
      absl::StrContains(message, "server certificate for") ||
      absl::StrContains(message, "invalid sslmode")) {
    return absl::StatusCode::kFailedPrecondition;
  }
  return absl::StatusCode::kUnavailable;
}

// The status code for a server error's SQLSTATE.
absl::StatusCode SqlStateCode(absl::string_view state) {
  if (absl::StartsWith(state, "08") ||                             // Connection exception.
      state == "57P01" || state == "57P02" || state == "57P03" ||  // Shutdown, starting up.
      state == "55P03" || state == "57014") {  // Lock not available, query canceled.
    return absl::StatusCode::kUnavailable;
  }
  if (state == "40001" || state == "40P01") return absl::StatusCode::kAborted;     // Retry.
  if (absl::StartsWith(state, "53")) return absl::StatusCode::kResourceExhausted;  // Disk full...
  if (absl::StartsWith(state, "28") || state == "42501") {
    return absl::StatusCode::kPermissionDenied;
  }
  if (state == "3D000") return absl::StatusCode::kNotFound;  // Invalid catalog name.
  if (state == "XX001" || state == "XX002") return absl::StatusCode::kDataLoss;  // Corrupt.
  if (absl::StartsWith(state, "22")) return absl::StatusCode::kInvalidArgument;  // Bad data.
  return absl::StatusCode::kInternal;
}

// Server notices ("relation already exists, skipping", ...) go to the debug
// log instead of libpq's default, stderr.
void LogNotice(void*, const char* message) { spdlog::debug("PostgreSQL: {}", OneLine(message)); }

}  // namespace

std::string PostgresTarget::Describe() const {
  return absl::StrCat("postgresql://", user, "@", address, "/", database);
}

std::string PostgresTarget::Redact(absl::string_view text) const {
  std::string redacted = RedactConnectionString(text);
  if (password.empty()) return redacted;
  return absl::StrReplaceAll(redacted, {{password, "***"}});
}

std::string RedactConnectionString(absl::string_view text) {
  std::string out(text);
  // URI userinfo: scheme://user:SECRET@host
  for (size_t scheme = out.find("://"); scheme != std::string::npos;
       scheme = out.find("://", scheme + 3)) {
    const size_t start = scheme + 3;
    const size_t end = out.find_first_of("/?@ \t\n\"'", start);
    if (end == std::string::npos || out[end] != '@') continue;
    const size_t colon = out.find(':', start);
    if (colon != std::string::npos && colon < end) out.replace(colon + 1, end - colon - 1, "***");
  }
  // password=SECRET, in key=value strings (maybe quoted) and URI queries.
  const std::string lower = absl::AsciiStrToLower(out);
  std::string result;
  size_t copied = 0;
  for (size_t at = lower.find("password"); at != std::string::npos;
       at = lower.find("password", at + 1)) {
    size_t value = at + strlen("password");
    while (value < out.size() && out[value] == ' ') ++value;
    if (value >= out.size() || out[value] != '=') continue;
    ++value;
    while (value < out.size() && out[value] == ' ') ++value;
    size_t end = value;
    if (end < out.size() && out[end] == '\'') {
      end = out.find('\'', end + 1);
      end = end == std::string::npos ? out.size() : end + 1;
    } else {
      end = out.find_first_of(" \t\n&\"", value);
      if (end == std::string::npos) end = out.size();
    }
    if (value < copied) continue;
    absl::StrAppend(&result, absl::string_view(out).substr(copied, value - copied), "***");
    copied = end;
  }
  absl::StrAppend(&result, absl::string_view(out).substr(copied));
  return result;
}

absl::StatusOr<PostgresTarget> ParsePostgresTarget(const std::string& conninfo) {
  char* error = nullptr;
  Conninfo parsed(PQconninfoParse(conninfo.c_str(), &error));
  if (parsed == nullptr) {
    std::string reason = error != nullptr ? OneLine(error) : "out of memory";
    PQfreemem(error);
    return absl::InvalidArgumentError(
        absl::StrCat("PostgreSQL connection string '", RedactConnectionString(conninfo),
                     "' is not valid: ", RedactConnectionString(reason)));
  }
  Conninfo defaults(PQconndefaults());  // From the environment (PGHOST, ...).
  const auto value = [&](absl::string_view keyword) {
    std::string given = OptionValue(parsed.get(), keyword);
    if (given.empty() && defaults != nullptr) given = OptionValue(defaults.get(), keyword);
    return given;
  };
  PostgresTarget target;
  target.conninfo = conninfo;
  target.password = OptionValue(parsed.get(), "password");
  target.user = value("user");
  target.database = value("dbname");
  if (target.database.empty()) target.database = target.user;
  // Several hosts may be listed; the first is the one named.
  std::vector<std::string> hosts = absl::StrSplit(value("host"), ',');
  std::string host = hosts.empty() ? "" : hosts[0];
  if (host.empty()) host = value("hostaddr");
  if (host.empty()) host = kDefaultSocketDir;
  std::vector<std::string> ports = absl::StrSplit(value("port"), ',');
  const std::string port = ports.empty() || ports[0].empty() ? "5432" : ports[0];
  target.address = absl::StrCat(host, ":", port);
  return target;
}

std::string PgInt8(int64_t value) {
  const uint64_t big_endian = htobe64(static_cast<uint64_t>(value));
  return std::string(reinterpret_cast<const char*>(&big_endian), sizeof big_endian);
}

std::string PgBytes(const PGresult* result, int row, int column) {
  return std::string(PQgetvalue(result, row, column), PQgetlength(result, row, column));
}

int64_t PgInt64(const PGresult* result, int row, int column) {
  uint64_t big_endian = 0;
  if (PQgetlength(result, row, column) == sizeof big_endian) {
    memcpy(&big_endian, PQgetvalue(result, row, column), sizeof big_endian);
  }
  return static_cast<int64_t>(be64toh(big_endian));
}

namespace {

// The status of a connection attempt `conn` that failed, naming the server,
// the database and the user, and what to check.
absl::Status ConnectError(const PostgresTarget& target, PGconn* conn) {
  const std::string reason = target.Redact(OneLine(PQerrorMessage(conn)));
  const absl::StatusCode code = ConnectErrorCode(reason);
  switch (code) {
    case absl::StatusCode::kPermissionDenied:
      return absl::Status(
          code, absl::StrCat("PostgreSQL at ", target.address, " refused user '", target.user,
                             "' for database '", target.database,
                             "' (check the user name and password in --database): ", reason));
    case absl::StatusCode::kNotFound:
      return absl::Status(
          code, absl::StrCat("PostgreSQL at ", target.address, " has no database '",
                             target.database, "' (create it, e.g. `createdb ", target.database,
                             "`, or name another in --database): ", reason));
    default:
      return absl::Status(
          code, absl::StrCat("cannot connect to PostgreSQL at ", target.address, " (database '",
                             target.database, "', user '", target.user, "'): ", reason));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresConnection>> PostgresConnection::Connect(
    const PostgresTarget& target, const PostgresConnectOptions& options) {
  const int64_t timeout_seconds =
      std::max<int64_t>(2, std::ceil(absl::ToDoubleSeconds(options.connect_timeout)));
  const std::string timeout = absl::StrCat(timeout_seconds);
  // The connection string expands in place of "dbname"; the keywords after
  // it override its values.
  std::vector<const char*> keywords = {"dbname", "fallback_application_name", "client_encoding",
                                       "connect_timeout"};
  std::vector<const char*> values = {target.conninfo.c_str(), "debugplane", "UTF8",
                                     timeout.c_str()};
  const int64_t io_ms = absl::ToInt64Milliseconds(options.io_timeout);
  const std::string io_timeout = absl::StrCat(io_ms);
  const std::string keepalive = absl::StrCat(std::max<int64_t>(1, io_ms / 3000));
  if (io_ms > 0) {
    for (const char* key : {"tcp_user_timeout", "keepalives_idle", "keepalives_interval"}) {
      keywords.push_back(key);
    }
    values.insert(values.end(), {io_timeout.c_str(), keepalive.c_str(), keepalive.c_str()});
    keywords.push_back("keepalives_count");
    values.push_back("2");
  }
  keywords.push_back(nullptr);
  values.push_back(nullptr);
  PGconn* conn = PQconnectdbParams(keywords.data(), values.data(), /*expand_dbname=*/1);
  if (conn == nullptr) return absl::ResourceExhaustedError("PostgreSQL: out of memory");
  if (PQstatus(conn) != CONNECTION_OK) {
    absl::Status refused = ConnectError(target, conn);
    PQfinish(conn);
    return refused;
  }
  PQsetNoticeProcessor(conn, LogNotice, nullptr);
  auto connection = std::unique_ptr<PostgresConnection>(new PostgresConnection(target, conn));
  // Each commit waits for its WAL record to be flushed (and for synchronous
  // standbys, if configured), whatever the server's or role's default: a
  // Write returns only once the batch is durable.
  if (auto set = connection->Exec("SET synchronous_commit TO on", "setting synchronous_commit");
      !set.ok()) {
    return set.status();
  }
  if (io_ms > 0) {
    // A number formatted here, not outside text.
    const std::string statement_timeout = absl::StrCat(
        "SET statement_timeout TO ", io_ms, "; SET idle_in_transaction_session_timeout TO ", io_ms);
    if (auto set = connection->Exec(statement_timeout.c_str(), "setting statement_timeout");
        !set.ok()) {
      return set.status();
    }
  }
  return connection;
}

PostgresConnection::~PostgresConnection() { PQfinish(conn_); }

absl::Status PostgresConnection::ResultError(const PGresult* result,
                                             absl::string_view doing) const {
  const char* state = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  const std::string reason = target_.Redact(
      OneLine(result != nullptr ? PQresultErrorMessage(result) : PQerrorMessage(conn_)));
  absl::StatusCode code = state != nullptr ? SqlStateCode(state) : absl::StatusCode::kInternal;
  if (broken()) code = absl::StatusCode::kUnavailable;  // Lost, whatever the statement.
  return absl::Status(
      code, absl::StrCat("PostgreSQL at ", target_.address, " (database '", target_.database,
                         "'): ", doing, ": ", reason.empty() ? "no reply" : reason,
                         state != nullptr ? absl::StrCat(" (SQLSTATE ", state, ")") : "",
                         broken() ? " (connection lost)" : ""));
}

absl::Status PostgresConnection::ResultStatus(const PGresult* result,
                                              absl::string_view doing) const {
  const ExecStatusType status = result != nullptr ? PQresultStatus(result) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return absl::OkStatus();
  if (status == PGRES_PIPELINE_ABORTED && !broken()) {
    return absl::AbortedError(absl::StrCat("PostgreSQL at ", target_.address, " (database '",
                                           target_.database, "'): ", doing,
                                           ": not run, a statement sent before it failed"));
  }
  return ResultError(result, doing);
}

absl::StatusOr<PgResult> PostgresConnection::Check(PgResult result, absl::string_view doing) const {
  if (absl::Status status = ResultStatus(result.get(), doing); !status.ok()) return status;
  return result;
}

PgPipeline::PgPipeline(PostgresConnection& connection) : connection_(connection) {
  entered_ = PQenterPipelineMode(connection_.raw()) == 1;
}

PgPipeline::~PgPipeline() {
  if (!ran_) Run();  // Its results are dropped; the caller gave up on them.
}

void PgPipeline::Send(const char* sql) {
  ++sent_;
  if (!entered_ || queue_failed_) return;
  if (PQsendQueryParams(connection_.raw(), sql, 0, nullptr, nullptr, nullptr, nullptr,
                        /*resultFormat=*/0) != 1) {
    queue_failed_ = true;
    return;
  }
  ++queued_;
}

void PgPipeline::SendPrepared(const char* name, std::span<const PgParam> params) {
  ++sent_;
  if (!entered_ || queue_failed_) return;
  // debugplane's statements have at most 6 parameters: no allocation. More
  // is a programming error, reported by Run as a statement never sent.
  constexpr size_t kMaxParams = 16;
  const char* values[kMaxParams];
  int lengths[kMaxParams];
  int formats[kMaxParams];
  if (params.size() > kMaxParams) {
    queue_failed_ = true;
    return;
  }
  for (size_t i = 0; i < params.size(); ++i) {
    values[i] = params[i].data;
    lengths[i] = params[i].length;
    formats[i] = 1;
  }
  if (PQsendQueryPrepared(connection_.raw(), name, static_cast<int>(params.size()), values,
                          lengths, formats, /*resultFormat=*/1) != 1) {
    queue_failed_ = true;
    return;
  }
  ++queued_;
}

std::vector<PgResult> PgPipeline::Run() {
  ran_ = true;
  std::vector<PgResult> results;
  if (entered_) {
    // Sends the sync point and flushes the queue (blocking: libpq reads the
    // server's replies meanwhile, so a long queue cannot deadlock).
    if (PQpipelineSync(connection_.raw()) == 1) {
      results = ReadUpToSync();
    } else if (!connection_.broken()) {
      spdlog::error("PostgreSQL at {}: cannot send a pipeline: {}", connection_.target().address,
                    OneLine(PQerrorMessage(connection_.raw())));
    }
  }
  results.resize(sent_);  // Statements never sent, or never answered: null.
  return results;
}

std::vector<PgResult> PgPipeline::ReadUpToSync() {
  PGconn* const conn = connection_.raw();
  std::vector<PgResult> results;
  results.reserve(queued_);
  bool have_current = false;  // Whether the current statement's result came.
  int nulls_in_a_row = 0;
  bool synced = false;
  while (!synced && !connection_.broken()) {
    PgResult result(PQgetResult(conn));
    if (result == nullptr) {
      // The end of one statement's results. Two in a row cannot happen
      // before the sync point unless the connection failed: stop then.
      if (++nulls_in_a_row > 1) break;
      have_current = false;
      continue;
    }
    nulls_in_a_row = 0;
    if (PQresultStatus(result.get()) == PGRES_PIPELINE_SYNC) {
      synced = true;
    } else if (!have_current) {
      have_current = true;
      results.push_back(std::move(result));
    }  // Else a statement's further results: none of ours has any.
  }
  // Without the sync point (the connection lost, or out of step) pipeline
  // mode stays on: reusable() is false, so the pool closes the connection.
  if (synced && PQexitPipelineMode(conn) != 1) {
    spdlog::error("PostgreSQL at {}: cannot leave pipeline mode: {}",
                  connection_.target().address, OneLine(PQerrorMessage(conn)));
  }
  return results;
}

absl::StatusOr<PgResult> PostgresConnection::Exec(const char* sql, absl::string_view doing) {
  return Check(PgResult(PQexec(conn_, sql)), doing);
}

absl::Status PostgresConnection::Prepare(const char* name, const char* sql,
                                         std::span<const Oid> types, absl::string_view doing) {
  return Check(PgResult(PQprepare(conn_, name, sql, static_cast<int>(types.size()), types.data())),
               doing)
      .status();
}

absl::StatusOr<PgResult> PostgresConnection::ExecPrepared(const char* name,
                                                          std::span<const PgParam> params,
                                                          absl::string_view doing) {
  std::vector<const char*> values;
  std::vector<int> lengths;
  const std::vector<int> formats(params.size(), 1);
  for (const PgParam& param : params) {
    values.push_back(param.data);
    lengths.push_back(param.length);
  }
  return Check(PgResult(PQexecPrepared(conn_, name, static_cast<int>(params.size()), values.data(),
                                       lengths.data(), formats.data(), /*resultFormat=*/1)),
               doing);
}

PostgresConnectionPool::PostgresConnectionPool(PostgresTarget target,
                                               PostgresConnectOptions options, int size,
                                               SetUp set_up)
    : target_(std::move(target)),
      options_(options),
      size_(std::max(1, size)),
      set_up_(std::move(set_up)) {}

PostgresConnectionPool::~PostgresConnectionPool() = default;

PostgresConnectionPool::Lease::Lease(Lease&& other) noexcept
    : pool_(other.pool_), connection_(std::move(other.connection_)), fresh_(other.fresh_) {}

PostgresConnectionPool::Lease::~Lease() {
  if (connection_ != nullptr) pool_->GiveBack(std::move(connection_));
}

absl::StatusOr<PostgresConnectionPool::Lease> PostgresConnectionPool::Acquire() {
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](PostgresConnectionPool* pool) ABSL_EXCLUSIVE_LOCKS_REQUIRED(pool->mu_) {
          return !pool->idle_.empty() || pool->open_ < pool->size_;
        },
        this));
    if (!idle_.empty()) {
      std::unique_ptr<PostgresConnection> connection = std::move(idle_.back());
      idle_.pop_back();
      return Lease(this, std::move(connection), /*fresh=*/false);
    }
    ++open_;  // Counted while it is being opened, so the pool stays bounded.
  }
  // Connecting takes a round trip or a time-out: not under the lock.
  absl::StatusOr<std::unique_ptr<PostgresConnection>> connection =
      PostgresConnection::Connect(target_, options_);
  absl::Status set_up = connection.status();
  if (set_up.ok() && set_up_) set_up = set_up_(**connection);
  if (!set_up.ok()) {
    absl::MutexLock lock(&mu_);
    --open_;
    return set_up;
  }
  return Lease(this, *std::move(connection), /*fresh=*/true);
}

void PostgresConnectionPool::DropIdle() {
  std::vector<std::unique_ptr<PostgresConnection>> dropped;
  {
    absl::MutexLock lock(&mu_);
    dropped.swap(idle_);
    open_ -= static_cast<int>(dropped.size());
  }
  // Closed here, outside the lock.
}

void PostgresConnectionPool::GiveBack(std::unique_ptr<PostgresConnection> connection) {
  // A connection left inside a transaction (a ROLLBACK that failed) would
  // run the next holder's statements in it: closed like a broken one.
  const bool reusable = connection->reusable();
  if (!reusable) connection.reset();  // Closed outside the lock.
  absl::MutexLock lock(&mu_);
  if (!reusable) {
    --open_;
  } else {
    idle_.push_back(std::move(connection));
  }
}

absl::StatusOr<PgResult> PostgresConnectionPool::ExecPreparedOnce(const char* name,
                                                                  std::span<const PgParam> params,
                                                                  absl::string_view doing) {
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<Lease> lease = Acquire();
    if (!lease.ok()) return lease.status();
    absl::StatusOr<PgResult> result = (**lease).ExecPrepared(name, params, doing);
    if (!result.ok() && !lease->fresh() && (**lease).broken() && attempt == 0) {
      DropIdle();
      continue;
    }
    return result;
  }
}

absl::Status PrepareAll(PostgresConnection& connection, std::span<const PgStatement> statements) {
  for (const PgStatement& statement : statements) {
    if (absl::Status prepared =
            connection.Prepare(statement.name, statement.sql.c_str(), statement.types,
                               absl::StrCat("preparing statement ", statement.name));
        !prepared.ok()) {
      return prepared;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<PostgresConnectionPool>> OpenPostgresPool(
    const std::string& conninfo, absl::Duration io_timeout, int size,
    PostgresConnectionPool::SetUp set_up) {
  absl::StatusOr<PostgresTarget> target = ParsePostgresTarget(conninfo);
  if (!target.ok()) return target.status();
  auto pool = std::make_unique<PostgresConnectionPool>(
      *std::move(target),
      PostgresConnectOptions{.connect_timeout = absl::Seconds(2), .io_timeout = io_timeout}, size,
      std::move(set_up));
  {
    auto lease = pool->Acquire();
    if (!lease.ok()) return lease.status();
  }
  return pool;
}

}  // namespace debugplane::persistence
