#include "tests/persistence/postgres_test_server.h"

#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "tests/support/wait_until.h"

namespace debugplane::testing {
namespace {

namespace fs = std::filesystem;

constexpr char kInstallHint[] =
    "the PostgreSQL tests need Debian's PostgreSQL server: run scripts/install-deps.sh "
    "(package postgresql), or set DP_POSTGRES_BINDIR to a directory with initdb and postgres";

// The newest /usr/lib/postgresql/<version>/bin that has a server, or
// $DP_POSTGRES_BINDIR.
absl::StatusOr<fs::path> FindBinDir() {
  if (const char* given = std::getenv("DP_POSTGRES_BINDIR"); given != nullptr && *given != '\0') {
    return fs::path(given);
  }
  std::vector<std::pair<int, fs::path>> found;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", error)) {
    const fs::path bin = entry.path() / "bin";
    if (access((bin / "postgres").c_str(), X_OK) == 0 &&
        access((bin / "initdb").c_str(), X_OK) == 0) {
      found.emplace_back(std::atoi(entry.path().filename().c_str()), bin);
    }
  }
  if (found.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no PostgreSQL server under /usr/lib/postgresql/*/bin; ", kInstallHint));
  }
  return std::max_element(found.begin(), found.end())->second;
}

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  return port;
}

std::string RandomHex(int bytes) {
  std::random_device random;
  std::string hex;
  for (int i = 0; i < bytes; ++i) absl::StrAppendFormat(&hex, "%02x", random() & 0xff);
  return hex;
}

// The program's arguments as execv wants them; `args` must outlive it.
std::vector<char*> Argv(std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  return argv;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresTestServer>> PostgresTestServer::Start() {
  auto server = std::unique_ptr<PostgresTestServer>(new PostgresTestServer());
  absl::StatusOr<fs::path> bin_dir = FindBinDir();
  if (!bin_dir.ok()) return bin_dir.status();
  server->bin_dir_ = *bin_dir;
  if (geteuid() == 0) {
    // PostgreSQL will not run as root: a user every Debian system has.
    const passwd* nobody = getpwnam("nobody");
    if (nobody == nullptr) {
      return absl::FailedPreconditionError(
          "running as root, and there is no user 'nobody' to run PostgreSQL as");
    }
    server->drop_privileges_ = true;
    server->uid_ = nobody->pw_uid;
    server->gid_ = nobody->pw_gid;
  }
  // Under /tmp, not the test's temp dir: every parent must be searchable by
  // the server's user.
  const char* tmp_env = std::getenv("TMPDIR");
  const fs::path tmp = tmp_env != nullptr && *tmp_env != '\0' ? tmp_env : "/tmp";
  absl::StatusOr<fs::path> dir = server->MakeOwnedDir((tmp / "dp-postgres-").string());
  if (!dir.ok()) return dir.status();
  server->dir_ = *dir;
  server->port_ = FreeLoopbackPort();
  if (absl::Status prepared = server->PrepareData(tmp); !prepared.ok()) return prepared;
  if (absl::Status launched = server->Launch(); !launched.ok()) return launched;
  return server;
}

PostgresTestServer::~PostgresTestServer() {
  if (pid_ > 0) (void)Stop(StopMode::kFast);
  if (!dir_.empty()) {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
}

std::string PostgresTestServer::address() const { return absl::StrCat("127.0.0.1:", port_); }

std::string PostgresTestServer::Uri(const std::string& database) const {
  return absl::StrCat("postgresql://", kUser, ":", password_, "@", address(), "/", database);
}

std::string PostgresTestServer::LogTail() const {
  std::ifstream in(dir_ / "postgres.log");
  std::string log(std::istreambuf_iterator<char>(in), {});
  if (log.size() > 4000) log = log.substr(log.size() - 4000);
  return log;
}

absl::StatusOr<fs::path> PostgresTestServer::MakeOwnedDir(const std::string& prefix) const {
  std::string pattern = prefix + "XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", pattern, ": ", std::strerror(errno)));
  }
  if (drop_privileges_ && chown(pattern.c_str(), uid_, gid_) != 0) {
    return absl::InternalError(absl::StrCat("chown ", pattern, ": ", std::strerror(errno)));
  }
  return fs::path(pattern);
}

absl::Status PostgresTestServer::InitDb(const fs::path& dir) {
  const fs::path password_file = dir / "password";
  const fs::path log = dir / "initdb.log";
  {
    std::ofstream out(password_file);
    out << password_;
  }
  std::vector<std::string> args = {(bin_dir_ / "initdb").string(),
                                   "--no-sync",  // The test's files, not the server's commits.
                                   "-D",
                                   (dir / "data").string(),
                                   "-U",
                                   kUser,
                                   "--auth=scram-sha-256",
                                   absl::StrCat("--pwfile=", password_file.string()),
                                   "-E",
                                   "UTF8",
                                   "--locale=C.UTF-8"};
  std::vector<char*> argv = Argv(args);
  if (drop_privileges_ && chown(password_file.c_str(), uid_, gid_) != 0) {
    return absl::InternalError(
        absl::StrCat("chown ", password_file.string(), ": ", std::strerror(errno)));
  }
  const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    if (drop_privileges_ &&
        (setgroups(0, nullptr) != 0 || setgid(gid_) != 0 || setuid(uid_) != 0)) {
      _exit(126);
    }
    if (chdir(dir.c_str()) != 0) _exit(126);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(log_fd);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    std::ifstream in(log);
    return absl::FailedPreconditionError(
        absl::StrCat("initdb in ", dir.string(), " failed (status ", status, "); ", kInstallHint,
                     "; its output:\n", std::string(std::istreambuf_iterator<char>(in), {})));
  }
  return absl::OkStatus();
}

absl::Status PostgresTestServer::PrepareData(const fs::path& tmp) {
  // initdb takes seconds; copying its result a fraction of one. One
  // template per machine, server version and user, made once, atomically
  // (built aside, then renamed into place).
  const fs::path template_dir =
      tmp / absl::StrCat("dp-postgres-template-v1-", drop_privileges_ ? uid_ : geteuid(), "-",
                         bin_dir_.parent_path().filename().string());
  if (!fs::exists(template_dir / "ready")) {
    absl::StatusOr<fs::path> building = MakeOwnedDir(template_dir.string() + ".building-");
    if (!building.ok()) return building.status();
    password_ = absl::StrCat("pw-", RandomHex(12));
    absl::Status initialized = InitDb(*building);
    if (initialized.ok()) std::ofstream(*building / "ready") << "ok\n";
    std::error_code ignored;
    if (!initialized.ok() || rename(building->c_str(), template_dir.c_str()) != 0) {
      fs::remove_all(*building, ignored);  // Failed, or another test made it first.
    }
    if (!initialized.ok()) return initialized;
  }
  {
    std::ifstream in(template_dir / "password");
    if (!std::getline(in, password_) || password_.empty()) {
      return absl::InternalError(
          absl::StrCat("the PostgreSQL template ", template_dir.string(),
                       " has no password file; delete the directory to have it made again"));
    }
  }
  std::error_code error;
  fs::copy(template_dir / "data", dir_ / "data", fs::copy_options::recursive, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("copying ", template_dir.string(), "/data: ", error.message()));
  }
  if (!drop_privileges_) return absl::OkStatus();
  for (const auto& entry : fs::recursive_directory_iterator(dir_ / "data")) {
    if (lchown(entry.path().c_str(), uid_, gid_) != 0) {
      return absl::InternalError(
          absl::StrCat("chown ", entry.path().string(), ": ", std::strerror(errno)));
    }
  }
  return lchown((dir_ / "data").c_str(), uid_, gid_) == 0
             ? absl::OkStatus()
             : absl::InternalError(absl::StrCat("chown ", dir_.string(), "/data"));
}

absl::Status PostgresTestServer::Launch() {
  std::vector<std::string> args = {(bin_dir_ / "postgres").string(),
                                   "-D",
                                   (dir_ / "data").string(),
                                   "-p",
                                   absl::StrCat(port_),
                                   "-k",
                                   dir_.string(),
                                   "-c",
                                   "listen_addresses=127.0.0.1",
                                   "-c",
                                   "fsync=on",
                                   "-c",
                                   "synchronous_commit=on",
                                   "-c",
                                   "shared_buffers=16MB",
                                   "-c",
                                   "max_connections=60"};
  std::vector<char*> argv = Argv(args);
  const int log_fd =
      open((dir_ / "postgres.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    if (drop_privileges_ &&
        (setgroups(0, nullptr) != 0 || setgid(gid_) != 0 || setuid(uid_) != 0)) {
      _exit(126);
    }
    // After setuid (which clears it): the server ends with the test, even
    // one that crashed. SIGQUIT: immediate shutdown.
    prctl(PR_SET_PDEATHSIG, SIGQUIT);
    if (getppid() != parent) _exit(1);
    if (chdir(dir_.c_str()) != 0) _exit(126);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(log_fd);
  if (pid_ < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));

  const std::string ping = absl::StrCat("host=127.0.0.1 port=", port_,
                                        " dbname=postgres user=", kUser, " connect_timeout=2");
  absl::Status exited;  // Not OK once postgres exited instead of serving.
  const bool settled = WaitUntil(
      [&] {
        if (PQping(ping.c_str()) == PQPING_OK) return true;
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
        pid_ = -1;
        exited = absl::FailedPreconditionError(absl::StrCat("postgres on port ", port_,
                                                            " exited at start (status ", status,
                                                            "); its log:\n", LogTail()));
        return true;
      },
      absl::Seconds(60));
  if (settled) return exited;
  (void)Stop(StopMode::kImmediate);
  return absl::DeadlineExceededError(
      absl::StrCat("postgres on port ", port_,
                   " did not accept connections within 60 s; its log:\n", LogTail()));
}

absl::Status PostgresTestServer::Stop(StopMode mode) {
  if (pid_ <= 0) return absl::FailedPreconditionError("the PostgreSQL test server is not running");
  // The postmaster's signals for pg_ctl's shutdown modes.
  kill(pid_, mode == StopMode::kFast ? SIGINT : SIGQUIT);
  int status = 0;
  const pid_t reaped = waitpid(pid_, &status, 0);
  pid_ = -1;
  if (reaped < 0) return absl::InternalError(absl::StrCat("waitpid: ", std::strerror(errno)));
  return absl::OkStatus();
}

absl::Status PostgresTestServer::StartAgain() {
  if (pid_ > 0) return absl::FailedPreconditionError("the PostgreSQL test server is running");
  return Launch();
}

absl::StatusOr<std::string> PostgresTestServer::CreateDatabase() {
  const std::string name = absl::StrCat("dp_test_", ++databases_created_);
  absl::StatusOr<std::string> created = Query("postgres", absl::StrCat("CREATE DATABASE ", name));
  if (!created.ok()) return created.status();
  return name;
}

absl::StatusOr<std::string> PostgresTestServer::Query(const std::string& database,
                                                      const std::string& sql) const {
  // As the superuser, with the password (as the storage under test does).
  const std::string conninfo =
      absl::StrCat("host=127.0.0.1 port=", port_, " dbname=", database, " user=", kUser,
                   " password=", password_, " connect_timeout=5");
  PGconn* conn = PQconnectdb(conninfo.c_str());
  std::string error;
  std::string value;
  if (PQstatus(conn) != CONNECTION_OK) {
    error = PQerrorMessage(conn);
  } else {
    PGresult* result = PQexec(conn, sql.c_str());
    const ExecStatusType status = PQresultStatus(result);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      error = PQresultErrorMessage(result);
    } else if (PQntuples(result) > 0 && PQnfields(result) > 0) {
      value = PQgetvalue(result, 0, 0);
    }
    PQclear(result);
  }
  PQfinish(conn);
  if (!error.empty()) {
    return absl::InternalError(absl::StrCat("test query '", sql, "' in ", database, ": ", error));
  }
  return value;
}

}  // namespace debugplane::testing
