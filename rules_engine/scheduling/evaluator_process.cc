#include "rules_engine/scheduling/evaluator_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace debugplane::rules_engine::internal {
namespace {

constexpr size_t kReadChunk = 64 * 1024;

absl::Status CannotRun(const std::string& path, absl::string_view why) {
  return absl::FailedPreconditionError(absl::StrCat("cannot run evaluator ", path, ": ", why));
}

// The child's "NAME=value" strings: `base` overridden by the evaluation's
// own entries, each name checked.
absl::StatusOr<std::vector<std::string>> ChildEnvironment(
    const CustomEvaluation& evaluation,
    const std::vector<std::pair<std::string, std::string>>& base) {
  std::map<std::string, std::string> merged(base.begin(), base.end());
  for (const auto& [name, value] : evaluation.environment) {
    if (name.empty() || name.find('=') != std::string::npos ||
        name.find('\0') != std::string::npos) {
      return CannotRun(evaluation.argv[0],
                       absl::StrCat("invalid environment variable name '", name, "'"));
    }
    merged[name] = value;
  }
  std::vector<std::string> entries;
  entries.reserve(merged.size());
  for (const auto& [name, value] : merged) entries.push_back(name + "=" + value);
  return entries;
}

// The NULL-terminated array of C strings that exec takes, pointing into
// `strings` (which must outlive it).
std::vector<char*> ExecArray(std::vector<std::string>& strings) {
  std::vector<char*> array;
  array.reserve(strings.size() + 1);
  for (std::string& entry : strings) array.push_back(entry.data());
  array.push_back(nullptr);
  return array;
}

// posix_spawn's file actions and attributes for an evaluator writing into
// `output_write_fd`, destroyed with this object.
class SpawnSetup {
 public:
  SpawnSetup(int output_write_fd, const std::string& working_directory) {
    posix_spawn_file_actions_init(&actions_);
    posix_spawn_file_actions_addopen(&actions_, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions_, output_write_fd, 1);
    posix_spawn_file_actions_adddup2(&actions_, output_write_fd, 2);
    if (!working_directory.empty()) {
      posix_spawn_file_actions_addchdir_np(&actions_, working_directory.c_str());
    }
    // The server's sockets, database and other descriptors (some may lack
    // O_CLOEXEC) must not leak into a program it does not control.
    posix_spawn_file_actions_addclosefrom_np(&actions_, 3);

    posix_spawnattr_init(&attributes_);
    // A process group of its own: signals reach the evaluator's children
    // too, and a terminal's Ctrl-C to the server does not reach the
    // evaluator.
    posix_spawnattr_setpgroup(&attributes_, 0);
    // The server may block or ignore signals (e.g. SIGPIPE, SIGTERM in
    // worker threads); the evaluator starts with the defaults.
    sigset_t empty_mask;
    sigemptyset(&empty_mask);
    posix_spawnattr_setsigmask(&attributes_, &empty_mask);
    sigset_t defaults;
    sigemptyset(&defaults);
    for (int signal = 1; signal < 32; ++signal) {
      if (signal != SIGKILL && signal != SIGSTOP) sigaddset(&defaults, signal);
    }
    posix_spawnattr_setsigdefault(&attributes_, &defaults);
    posix_spawnattr_setflags(
        &attributes_, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions_);
    posix_spawnattr_destroy(&attributes_);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;

  const posix_spawn_file_actions_t* actions() const { return &actions_; }
  const posix_spawnattr_t* attributes() const { return &attributes_; }

 private:
  posix_spawn_file_actions_t actions_;
  posix_spawnattr_t attributes_;
};

}  // namespace

// strerror() is not thread-safe for unknown codes; strerrordesc_np is
// (glibc >= 2.32) and is not localized, which suits details read by people
// who search for them.
std::string ErrnoText(int error) {
  const char* text = strerrordesc_np(error);
  return text != nullptr ? std::string(text) : absl::StrCat("errno ", error);
}

std::string SignalText(int signal) {
  const char* name = sigabbrev_np(signal);
  return name != nullptr ? absl::StrCat(signal, " (SIG", name, ")") : absl::StrCat(signal);
}

std::vector<std::pair<std::string, std::string>> EvaluatorBaseEnvironment() {
  std::vector<std::pair<std::string, std::string>> base;
  const char* path = std::getenv("PATH");
  base.emplace_back("PATH",
                    path != nullptr && *path != '\0' ? path : "/usr/local/bin:/usr/bin:/bin");
  for (const char* name : {"HOME", "LANG"}) {
    if (const char* value = std::getenv(name); value != nullptr) base.emplace_back(name, value);
  }
  return base;
}

absl::StatusOr<SpawnedEvaluator> SpawnEvaluator(
    const CustomEvaluation& evaluation,
    const std::vector<std::pair<std::string, std::string>>& base_environment) {
  if (evaluation.argv.empty() || evaluation.argv[0].empty()) {
    return absl::InvalidArgumentError("evaluator has no command");
  }
  const std::string& path = evaluation.argv[0];
  if (path[0] != '/') return CannotRun(path, "not an absolute path");
  absl::StatusOr<std::vector<std::string>> environment =
      ChildEnvironment(evaluation, base_environment);
  if (!environment.ok()) return environment.status();
  std::vector<char*> envp = ExecArray(*environment);
  std::vector<std::string> argv_strings = evaluation.argv;
  std::vector<char*> argv = ExecArray(argv_strings);

  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return CannotRun(path, "pipe: " + ErrnoText(errno));
  fcntl(pipe_fds[0], F_SETFL, fcntl(pipe_fds[0], F_GETFL) | O_NONBLOCK);

  // posix_spawn rather than fork: no copy of a large server's page tables,
  // nothing but libc runs in the child, and glibc reports an exec failure
  // (missing file, not executable) as its return value.
  pid_t pid = -1;
  int spawn_error;
  {
    const SpawnSetup setup(pipe_fds[1], evaluation.working_directory);
    spawn_error = posix_spawn(&pid, path.c_str(), setup.actions(), setup.attributes(), argv.data(),
                              envp.data());
  }
  close(pipe_fds[1]);
  if (spawn_error != 0) {
    close(pipe_fds[0]);
    const std::string where = evaluation.working_directory.empty()
                                  ? std::string()
                                  : absl::StrCat(" in ", evaluation.working_directory);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run evaluator ", path, where, ": ", ErrnoText(spawn_error)));
  }
  return SpawnedEvaluator{pid, pipe_fds[0]};
}

int OpenPidfd(pid_t pid) {
  // pidfd_open sets close-on-exec itself.
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

void SignalGroup(pid_t pid, int signal) {
  if (kill(-pid, signal) != 0) kill(pid, signal);
}

void ReadAvailableOutput(int* output_fd, int max_reads, OutputTail& tail) {
  if (*output_fd < 0) return;
  char buffer[kReadChunk];
  for (int reads = 0; reads < max_reads;) {
    const ssize_t got = read(*output_fd, buffer, sizeof(buffer));
    if (got > 0) {
      tail.Append(absl::string_view(buffer, static_cast<size_t>(got)));
      ++reads;
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // EOF (every writer is gone) or an error: nothing more to read.
    close(*output_fd);
    *output_fd = -1;
    return;
  }
}

ExitCheck ReapIfExited(pid_t pid) {
  // WNOWAIT: look without reaping, so that the pid (the group's id) stays
  // reserved while the group is killed below.
  siginfo_t info{};
  int rc;
  do {
    rc = waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
  } while (rc < 0 && errno == EINTR);
  ExitCheck check;
  if (rc < 0) {
    // ECHILD: someone else reaped it (SIGCHLD ignored, or waitpid(-1)).
    check.state = ExitCheck::kReapedElsewhere;
    check.error = errno;
    return check;
  }
  if (info.si_pid == 0) return check;
  // Whatever the evaluator left running in its group goes with it.
  kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  check.state = ExitCheck::kExited;
  check.wait_status = status;
  return check;
}

}  // namespace debugplane::rules_engine::internal
