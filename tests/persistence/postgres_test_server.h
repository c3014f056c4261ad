// PostgresTestServer: a real PostgreSQL server for one test, in a temporary
// directory: a copy of an `initdb` result (superuser "debugplane" with a
// random password, scram-sha-256 authentication; made once per machine
// under $TMPDIR or /tmp as dp-postgres-template-v1-UID-VERSION, since initdb
// takes seconds), then `postgres` on a free loopback port with its unix
// socket in that directory and fsync on.
//
// PostgreSQL refuses to run as root: under root (CI, containers) initdb and
// postgres run as the unprivileged user "nobody", and the directory is
// handed to that user. The binaries are Debian's (package postgresql,
// installed by scripts/install-deps.sh) under /usr/lib/postgresql/*/bin, or
// in $DP_POSTGRES_BINDIR. Start fails (never skips) if they are missing or
// the server does not come up, with the server's log in the message.
//
// Not thread-safe. Start, Stop and StartAgain must be called from a thread
// that outlives the server (the test's main thread): the server is bound to
// its starting thread's life, so that a crashed test leaves no PostgreSQL
// behind.

#ifndef DEBUGPLANE_TESTS_PERSISTENCE_POSTGRES_TEST_SERVER_H_
#define DEBUGPLANE_TESTS_PERSISTENCE_POSTGRES_TEST_SERVER_H_

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace debugplane::testing {

class PostgresTestServer {
 public:
  static constexpr char kUser[] = "debugplane";

  // Runs initdb and starts the server; waits until it accepts connections.
  static absl::StatusOr<std::unique_ptr<PostgresTestServer>> Start();
  // Stops the server (fast) and removes its directory.
  ~PostgresTestServer();

  PostgresTestServer(const PostgresTestServer&) = delete;
  PostgresTestServer& operator=(const PostgresTestServer&) = delete;

  enum class StopMode {
    kFast,       // pg_ctl -m fast: sessions end, a clean shutdown checkpoint.
    kImmediate,  // pg_ctl -m immediate: processes quit at once, recovery at the next start.
  };
  // Stops the server and waits until it has exited.
  absl::Status Stop(StopMode mode = StopMode::kFast);
  // Starts it again on the same port and data; waits until it serves.
  absl::Status StartAgain();

  // Creates a new empty database and returns its name.
  absl::StatusOr<std::string> CreateDatabase();
  // postgresql://debugplane:PASSWORD@127.0.0.1:PORT/DATABASE
  std::string Uri(const std::string& database) const;
  // Runs `sql` as the superuser in `database`; returns the first column of
  // the first row ("" if none).
  absl::StatusOr<std::string> Query(const std::string& database, const std::string& sql) const;

  int port() const { return port_; }
  std::string address() const;  // "127.0.0.1:PORT"
  const std::string& password() const { return password_; }

 private:
  PostgresTestServer() = default;
  // mkdtemp(prefix + "XXXXXX"), owned by the server's user.
  absl::StatusOr<std::filesystem::path> MakeOwnedDir(const std::string& prefix) const;
  // Runs initdb into `dir`/data with a new password.
  absl::Status InitDb(const std::filesystem::path& dir);
  // Fills dir_/data from the machine's template under `tmp` (made first if
  // missing) and reads its password.
  absl::Status PrepareData(const std::filesystem::path& tmp);
  absl::Status Launch();
  // The server's log, for failure messages.
  std::string LogTail() const;

  std::filesystem::path dir_;  // Owned by the server's user; removed at the end.
  std::filesystem::path bin_dir_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  bool drop_privileges_ = false;
  std::string password_;
  int port_ = 0;
  pid_t pid_ = -1;
  int databases_created_ = 0;
};

// A new empty database on a PostgreSQL server of its own, for one test or
// engine. Check status() before use: the server may not have started.
class ScratchPostgresDatabase {
 public:
  ScratchPostgresDatabase() {
    auto server = PostgresTestServer::Start();
    if (!server.ok()) {
      status_ = server.status();
      return;
    }
    server_ = *std::move(server);
    auto database = server_->CreateDatabase();
    status_ = database.status();
    if (database.ok()) name_ = *database;
  }

  const absl::Status& status() const { return status_; }
  // REQUIRES: status().ok() (for all three).
  PostgresTestServer& server() const { return *server_; }
  const std::string& name() const { return name_; }
  std::string Uri() const { return server_->Uri(name_); }

 private:
  absl::Status status_;
  std::unique_ptr<PostgresTestServer> server_;
  std::string name_;
};

}  // namespace debugplane::testing

#endif  // DEBUGPLANE_TESTS_PERSISTENCE_POSTGRES_TEST_SERVER_H_
