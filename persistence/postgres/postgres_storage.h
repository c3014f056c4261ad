// PostgreSQL implementation of Storage, over libpq: a pool of connections,
// prepared statements, one transaction per batch, the schema versioned in a
// `schema_version` table and migrated at open.
//
// Connection strings are libpq's: a URI
//   postgresql://USER:PASSWORD@HOST:PORT/DATABASE?sslmode=verify-full&sslrootcert=/etc/ca.pem
// (postgres:// too; a unix socket as ?host=/var/run/postgresql) or key=value
// ("host=db port=5432 dbname=debugplane user=dp"). Unset parts come from the
// PG* environment variables and ~/.pgpass as libpq reads them (PGPASSWORD or
// a password file keep the password out of the command line). TLS is
// libpq's: sslmode=require encrypts, verify-ca / verify-full also check the
// server's certificate against sslrootcert (verify-full checks its name);
// sslcert/sslkey give a client certificate.

#ifndef DEBUGPLANE_PERSISTENCE_POSTGRES_POSTGRES_STORAGE_H_
#define DEBUGPLANE_PERSISTENCE_POSTGRES_POSTGRES_STORAGE_H_

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "persistence/postgres/postgres_connection.h"
#include "persistence/postgres/postgres_migrations.h"
#include "persistence/storage.h"

namespace debugplane::persistence {

struct PostgresStorageOptions {
  // Connections opened at most (on demand). debugplane writes from one
  // committer thread; more serve concurrent readers.
  int pool_size = 4;
  // How long opening one connection may take (whole seconds, at least 2).
  absl::Duration connect_timeout = absl::Seconds(10);
  // See PostgresConnectOptions::io_timeout (zero: TCP's own timeouts). With
  // evaluation leases the server sets it below the lease, so that a write
  // cut off by a partition neither hangs nor keeps the lease row locked on
  // the server (idle_in_transaction_session_timeout) past a takeover.
  absl::Duration io_timeout = absl::ZeroDuration();
};

// Thread-safe: every call takes a pooled connection for its duration.
//
// A database that is down or restarting fails calls with UNAVAILABLE naming
// its host:port; a connection that broke is replaced on the next call, so
// calls succeed again as soon as the server is back (no reopening). No error
// message contains the password.
class PostgresStorage final : public Storage {
 public:
  // Connects, migrates the schema (safe when several servers open the same
  // database at once) and prepares the statements.
  // Errors: INVALID_ARGUMENT (the connection string does not parse),
  // PERMISSION_DENIED (authentication refused, or the user may not create
  // the tables; names the user and database), NOT_FOUND (no such database),
  // FAILED_PRECONDITION (schema newer than this build: names both versions;
  // or TLS cannot be set up as asked), UNAVAILABLE (the server cannot be
  // reached; names host:port).
  static absl::StatusOr<std::unique_ptr<PostgresStorage>> Open(
      const std::string& conninfo, const PostgresStorageOptions& options = {});

  ~PostgresStorage() override;

  PostgresStorage(const PostgresStorage&) = delete;
  PostgresStorage& operator=(const PostgresStorage&) = delete;

  // One transaction per batch, committed with synchronous_commit on.
  // If the connection is lost during COMMIT, the outcome is asked of the
  // server on a new connection (txid_status): OK if the batch committed, an
  // error if it did not; if the server cannot be reached to ask, UNAVAILABLE
  // saying that the batch may or may not have been applied (the one case in
  // which an error does not mean "nothing applied"; all or nothing still
  // holds).
  absl::Status Write(const WriteBatch& batch) override;
  // Every writing transaction first locks the one-row change sequence
  // counter, so writes (of every server on the database) are serialized;
  // that orders the feed by commit. NOTIFY in the transaction tells the
  // listeners of SubscribeToChanges at its commit.
  absl::StatusOr<WriteResult> WriteAndReport(const WriteBatch& batch) override;
  absl::StatusOr<std::optional<JobRow>> ReadJob(const std::string& name) override;
  absl::StatusOr<std::vector<JobChange>> ReadChangesAfter(int64_t after, int limit) override;
  absl::StatusOr<int64_t> LatestChangeSequence() override;
  // One DELETE in autocommit.
  absl::StatusOr<int64_t> PruneChanges(int64_t modified_before_us, int limit) override;
  // A PostgresChangeListener: its own connection, LISTENing on
  // DP_POSTGRES_CHANGE_CHANNEL (see postgres_change_listener.h).
  std::unique_ptr<ChangeSubscription> SubscribeToChanges(std::function<void()> wake) override;
  // The agent_presence table.
  absl::Status PutAgentPresence(const std::vector<AgentPresenceRow>& rows) override;
  absl::StatusOr<std::vector<AgentPresenceRow>> ReadAgentPresence(
      const std::string& job_name) override;
  // Names are ordered bytewise (COLLATE "C"), as in SqliteStorage. Rows are
  // read in pages, each a consistent snapshot; `visit` runs with no
  // connection held, so it may call Write.
  absl::Status ForEachJob(const std::function<absl::Status(const JobRow&)>& visit) override;

  // The schema version of the database (after migration).
  int schema_version() const { return schema_version_; }
  // The database, without the password, for logs.
  std::string Describe() const { return pool_.target().Describe(); }

 private:
  PostgresStorage(PostgresTarget target, const PostgresStorageOptions& options);

  // How far a failed WriteOn came.
  struct WriteProgress {
    // Whether the transaction had started (so whether a failure may have
    // touched the database).
    bool began = false;
    // Whether the statement that failed wrote a run of puts (PutRun): it
    // does not say which of them the server refused.
    bool failed_in_run = false;
  };
  // Writes the batch on `connection`: BEGIN, the counter's lock and the
  // operations' statements in one pipeline (one round trip), then COMMIT
  // once all succeeded. `by_runs`: each run of puts (postgres_put_runs.h)
  // in one statement; otherwise one statement per operation.
  absl::Status WriteOn(PostgresConnection& connection, const WriteBatch& batch, bool by_runs,
                       WriteProgress& progress, WriteResult& result);
  // Takes the outcome of operation `op` from row `row` of `written` (its
  // statement's result) into `result`; a version conflict or a refused
  // fence rolls the transaction back and is returned.
  absl::Status TakeResult(PostgresConnection& connection, const WriteOp& op,
                          const PGresult* written, size_t row, bool& changed_any,
                          WriteResult& result);
  // Commits the transaction WriteOn began (with a NOTIFY if `changed_any`);
  // a connection lost in COMMIT is resolved by `txid` (ResolveCommit).
  absl::Status CommitOn(PostgresConnection& connection, bool changed_any, const std::string& txid,
                        const WriteBatch& batch);
  // The ABORTED status of a write that expected `expected` of job `name`,
  // naming the version the row has (read on `connection`, in the
  // transaction if it can still read, else after rolling it back); the
  // transaction is rolled back.
  absl::Status VersionConflict(PostgresConnection& connection, const std::string& name,
                               int64_t expected);
  // Runs a prepared read-only statement on a pooled connection (again once
  // on a new one if the pooled one was cut since its last use).
  absl::StatusOr<PgResult> ReadOnly(const char* statement, std::span<const PgParam> params,
                                    absl::string_view doing);
  // After the connection was lost in COMMIT: whether transaction `txid`
  // committed, asked on a new connection.
  absl::Status ResolveCommit(const std::string& txid, const WriteBatch& batch);
  absl::Status ReadPage(const std::string* after, std::vector<JobRow>& rows);

  const PostgresStorageOptions options_;
  int schema_version_ = 0;  // Set by Open() before the object is shared.
  PostgresConnectionPool pool_;
};

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_POSTGRES_POSTGRES_STORAGE_H_
