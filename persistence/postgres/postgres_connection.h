// Connections to a PostgreSQL server over libpq: what a connection string
// names (without its password), one connection with prepared statements and
// errors mapped to absl::Status, and a bounded pool of them.
//
// Kept apart from PostgresStorage so that later users of the same database
// (leases, LISTEN/NOTIFY, metrics) reuse the connection handling.
//
// Secrets: a connection string may carry a password (URI userinfo,
// `password=`, `?password=`). No message built here contains it: it is
// stripped from every libpq message quoted, and targets describe themselves
// without it.

#ifndef DEBUGPLANE_PERSISTENCE_POSTGRES_POSTGRES_CONNECTION_H_
#define DEBUGPLANE_PERSISTENCE_POSTGRES_POSTGRES_CONNECTION_H_

#include <libpq-fe.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace debugplane::persistence {

// What a connection string names. Copyable, immutable once parsed.
struct PostgresTarget {
  std::string conninfo;  // As given: may contain the password, never print it.
  std::string address;   // "host:port" of the first host, e.g. "127.0.0.1:5432".
  std::string user;      // As libpq resolves it (the OS user if not given).
  std::string database;  // Defaults to the user name, as in libpq.
  std::string password;  // Only to strip it from messages; may be empty.

  // "postgresql://USER@ADDRESS/DATABASE", without the password: for logs.
  std::string Describe() const;
  // `text` with every occurrence of the password replaced by "***".
  std::string Redact(absl::string_view text) const;
};

// Parses a key=value connection string or a postgresql:// (postgres://) URI,
// taking defaults from libpq's environment (PGHOST, PGPORT, PGUSER, ...).
// Returns INVALID_ARGUMENT with libpq's reason if it does not parse; the
// message never contains the password.
absl::StatusOr<PostgresTarget> ParsePostgresTarget(const std::string& conninfo);

// `text` with passwords in connection strings masked: the userinfo of a URI
// ("postgresql://user:SECRET@") and `password=SECRET` (key=value or URI
// query). For strings that did not parse (so no password is known).
std::string RedactConnectionString(absl::string_view text);

struct PostgresConnectOptions {
  // How long establishing one connection may take (libpq's connect_timeout,
  // whole seconds, at least 2). A value in the connection string is
  // overridden.
  absl::Duration connect_timeout = absl::Seconds(10);
  // When above zero: a connection whose server stops answering (a network
  // partition that drops packets) fails within about this long instead of
  // waiting for TCP's own timeouts (minutes): libpq's tcp_user_timeout and
  // keepalives, and statement_timeout. For the leases, whose holder must
  // notice a lost database in a fraction of a lease.
  absl::Duration io_timeout = absl::ZeroDuration();
};

struct PgResultDeleter {
  void operator()(PGresult* result) const { PQclear(result); }
};
using PgResult = std::unique_ptr<PGresult, PgResultDeleter>;

// One parameter of a prepared statement, sent in binary format. The bytes
// must outlive the call.
struct PgParam {
  const char* data;
  int length;
};

// Parameter type OIDs of the statements debugplane prepares.
inline constexpr Oid kBoolOid = 16;
inline constexpr Oid kByteaOid = 17;
inline constexpr Oid kInt8Oid = 20;
inline constexpr Oid kTextOid = 25;

// A big-endian int8 parameter's bytes.
std::string PgInt8(int64_t value);
// Reads column `column` of row `row` of a binary-format result: bytes of a
// text or bytea column, or an int8.
std::string PgBytes(const PGresult* result, int row, int column);
int64_t PgInt64(const PGresult* result, int row, int column);

// One libpq connection. Not thread-safe: one user at a time (the pool hands
// each to one caller). Every error names the target's address, user or
// database as fitting, and never the password.
class PostgresConnection {
 public:
  // Connects and sets the session up (synchronous_commit on, UTF8).
  // Errors: PERMISSION_DENIED (authentication refused: names the user and
  // database), NOT_FOUND (the database does not exist), FAILED_PRECONDITION
  // (TLS cannot be set up as the sslmode/sslrootcert parameters ask),
  // UNAVAILABLE (cannot connect: refused, timed out, starting up or shutting
  // down; names the address).
  static absl::StatusOr<std::unique_ptr<PostgresConnection>> Connect(
      const PostgresTarget& target, const PostgresConnectOptions& options);
  ~PostgresConnection();

  PostgresConnection(const PostgresConnection&) = delete;
  PostgresConnection& operator=(const PostgresConnection&) = delete;

  // Runs parameterless SQL (one or more ';'-separated statements) and returns
  // the last statement's result, in text format. `doing` says what for, in
  // errors. Only SQL written in this program, never values.
  absl::StatusOr<PgResult> Exec(const char* sql, absl::string_view doing);
  // Prepares `sql` as statement `name` with parameters of `types` (OIDs).
  absl::Status Prepare(const char* name, const char* sql, std::span<const Oid> types,
                       absl::string_view doing);
  // Runs the prepared statement `name`; parameters and results in binary.
  absl::StatusOr<PgResult> ExecPrepared(const char* name, std::span<const PgParam> params,
                                        absl::string_view doing);

  // The status of `result`, one of this connection's results (null: the
  // call got none, e.g. the connection was lost): OK for a completed
  // command or rows; else the server's message (redacted) with its SQLSTATE
  // after `doing`, and UNAVAILABLE whenever the connection is lost. A
  // statement a pipeline skipped after an earlier one failed is ABORTED.
  absl::Status ResultStatus(const PGresult* result, absl::string_view doing) const;

  // Whether the connection is lost (the server closed it, or it broke):
  // it cannot be used again.
  bool broken() const { return PQstatus(conn_) != CONNECTION_OK; }
  // Whether it can serve another holder: not broken, in no transaction, and
  // out of pipeline mode.
  bool reusable() const {
    return !broken() && PQtransactionStatus(conn_) == PQTRANS_IDLE &&
           PQpipelineStatus(conn_) == PQ_PIPELINE_OFF;
  }
  const PostgresTarget& target() const { return target_; }
  // The libpq connection, for what this class does not wrap (LISTEN's
  // socket and notifications). Owned by this object.
  PGconn* raw() const { return conn_; }

 private:
  PostgresConnection(const PostgresTarget& target, PGconn* conn) : target_(target), conn_(conn) {}
  // The status for a failed result (null: the call failed without one).
  absl::Status ResultError(const PGresult* result, absl::string_view doing) const;
  absl::StatusOr<PgResult> Check(PgResult result, absl::string_view doing) const;

  const PostgresTarget target_;
  PGconn* const conn_;  // Owned; PQfinish'ed by the destructor.
};

// Statements sent in libpq's pipeline mode: queued on one connection, sent
// together with one sync point, their results read in order: one round trip
// for all of them instead of one each. Statements after one that failed are
// skipped by the server up to the sync point; in an explicit transaction
// (BEGIN queued first) the transaction is then left failed, for the caller
// to roll back. Not thread-safe; the connection is the holder's alone
// while the pipeline lives.
//
// Usage:
//   PgPipeline pipeline(connection);
//   pipeline.Send("BEGIN");
//   pipeline.SendPrepared("dp_put_job", params);
//   std::vector<PgResult> results = pipeline.Run();  // One per Send, in order.
//   connection.ResultStatus(results[i].get(), "writing job 'x'");
class PgPipeline {
 public:
  // Enters pipeline mode. REQUIRES: the connection is idle and not in
  // pipeline mode. If it cannot (a lost connection), the statements are
  // not sent and Run reports why.
  explicit PgPipeline(PostgresConnection& connection);
  // Leaves pipeline mode if Run did not (reading and dropping results still
  // due), so the connection is never handed on inside a pipeline.
  ~PgPipeline();

  PgPipeline(const PgPipeline&) = delete;
  PgPipeline& operator=(const PgPipeline&) = delete;

  // Queues one SQL statement without parameters, written in this program;
  // its result in text format.
  void Send(const char* sql);
  // Queues prepared statement `name` with `params` (binary; copied into
  // libpq's buffer now); its result in binary format.
  void SendPrepared(const char* name, std::span<const PgParam> params);

  // Sends the queue with a sync point and reads one result per queued
  // statement, in order; then leaves pipeline mode. An entry is the
  // statement's result (an error result if it failed; PGRES_PIPELINE_ABORTED
  // if it was skipped after a failure), or null if none came (the
  // connection was lost, or a statement could not be queued): see
  // PostgresConnection::ResultStatus. REQUIRES: called once.
  std::vector<PgResult> Run();

 private:
  // Reads the results due up to the sync point, the first of each
  // statement, and leaves pipeline mode; stops early if the connection is
  // lost (pipeline mode is then left with the connection).
  std::vector<PgResult> ReadUpToSync();

  PostgresConnection& connection_;
  bool entered_ = false;
  bool ran_ = false;
  size_t sent_ = 0;             // Send and SendPrepared calls.
  size_t queued_ = 0;           // Of them, the statements libpq accepted (the first ones).
  bool queue_failed_ = false;  // A statement libpq refused: later ones are not queued.
};

// A bounded set of connections to one target, opened on demand. Thread-safe.
// A connection that broke is dropped when given back, so the next Acquire
// connects anew: a restarted server is used again with no action.
// One statement to prepare on each connection of a pool (see PrepareAll).
struct PgStatement {
  const char* name;
  std::string sql;
  std::vector<Oid> types;
};

// Prepares every statement on `connection`; the first error, naming the
// statement, if one fails.
absl::Status PrepareAll(PostgresConnection& connection, std::span<const PgStatement> statements);

class PostgresConnectionPool {
 public:
  // Runs on each new connection before it is first handed out (e.g. to
  // prepare statements); an error fails that Acquire.
  using SetUp = std::function<absl::Status(PostgresConnection&)>;

  // REQUIRES: size >= 1.
  PostgresConnectionPool(PostgresTarget target, PostgresConnectOptions options, int size,
                         SetUp set_up);
  // REQUIRES: no Lease outstanding.
  ~PostgresConnectionPool();

  // A connection for the holder's exclusive use, given back on destruction.
  class Lease {
   public:
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    PostgresConnection& operator*() const { return *connection_; }
    PostgresConnection* operator->() const { return connection_.get(); }
    // Whether the connection was just opened (not reused from the pool): a
    // reused one may have been cut since its last use.
    bool fresh() const { return fresh_; }

   private:
    friend class PostgresConnectionPool;
    Lease(PostgresConnectionPool* pool, std::unique_ptr<PostgresConnection> connection, bool fresh)
        : pool_(pool), connection_(std::move(connection)), fresh_(fresh) {}
    PostgresConnectionPool* pool_;
    std::unique_ptr<PostgresConnection> connection_;
    bool fresh_;
  };

  // An idle connection, a new one if fewer than `size` are open, or else
  // waits for one to be given back. Errors are PostgresConnection::Connect's
  // or SetUp's.
  absl::StatusOr<Lease> Acquire();

  // Closes every idle connection: after one was found cut (a server
  // restart), the others most likely were too.
  void DropIdle();

  // Runs one prepared statement in autocommit on a pooled connection; if the
  // connection turns out to have been cut since its last use, once more on
  // a new one (the statement never reached the server, or, for the callers'
  // statements, running it twice is harmless). Errors as ExecPrepared's or
  // Acquire's.
  absl::StatusOr<PgResult> ExecPreparedOnce(const char* name, std::span<const PgParam> params,
                                            absl::string_view doing);

  const PostgresTarget& target() const { return target_; }

 private:
  void GiveBack(std::unique_ptr<PostgresConnection> connection);

  const PostgresTarget target_;
  const PostgresConnectOptions options_;
  const int size_;
  const SetUp set_up_;

  absl::Mutex mu_;
  std::vector<std::unique_ptr<PostgresConnection>> idle_ ABSL_GUARDED_BY(mu_);
  int open_ ABSL_GUARDED_BY(mu_) = 0;  // Idle, leased, or being opened.
};

// A pool of `size` connections of its own to the database of `conninfo`
// (already migrated by PostgresStorage::Open), for a table beside the jobs
// (leases, reports): connecting takes at most 2 s and each call at most
// `io_timeout` when the server stops answering; `set_up` runs on each new
// connection. One connection is made and set up now, so that a problem
// shows at start. Errors as ParsePostgresTarget's and Acquire's; none
// contains the password.
absl::StatusOr<std::unique_ptr<PostgresConnectionPool>> OpenPostgresPool(
    const std::string& conninfo, absl::Duration io_timeout, int size,
    PostgresConnectionPool::SetUp set_up);

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_POSTGRES_POSTGRES_CONNECTION_H_
