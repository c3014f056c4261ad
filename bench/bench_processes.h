// Child processes for the benchmarks that run the real binaries: fork/exec
// with logs, bounded waits, and debugplane-server on a free loopback port.

#ifndef DEBUGPLANE_BENCH_BENCH_PROCESSES_H_
#define DEBUGPLANE_BENCH_BENCH_PROCESSES_H_

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"

namespace debugplane::bench {

// Forks and execs `args`; stdout goes to `stdout_fd` (or the log), stderr to
// `log_file`. Returns the pid, or -1. This process has threads (gRPC, the
// watcher), so everything the child needs is prepared before fork and the
// child makes only async-signal-safe calls.
inline pid_t Spawn(const std::vector<std::string>& args, const std::filesystem::path& log_file,
                   int stdout_fd) {
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string log_path = log_file.string();
  const pid_t pid = fork();
  if (pid != 0) return pid;
  const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (log >= 0) dup2(log, STDERR_FILENO);
  dup2(stdout_fd >= 0 ? stdout_fd : log, STDOUT_FILENO);
  const int null = open("/dev/null", O_RDONLY);
  if (null >= 0) dup2(null, STDIN_FILENO);
  execv(argv[0], argv.data());
  _exit(127);
}

// Waits for `pid` for up to `timeout`; returns its wait status, or nullopt
// if it is still running.
inline std::optional<int> WaitFor(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  do {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    absl::SleepFor(absl::Milliseconds(10));
  } while (absl::Now() < deadline);
  return std::nullopt;
}

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exit code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("signal ", WTERMSIG(status));
  return "ended";
}

// A client context whose deadline is `timeout` from now: every call a
// bench makes has one, so a wedged server fails the sample instead of
// hanging the run.
inline std::unique_ptr<grpc::ClientContext> ContextWithin(absl::Duration timeout) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return context;
}

// The path of `name` in this executable's directory (where the build puts
// the server, agent and bench binaries), or `name` itself if unknown.
inline std::string NextToSelf(const std::string& name) {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? name : (self.parent_path() / name).string();
}

class ServerChild {
 public:
  ~ServerChild() { Stop(absl::Seconds(15)); }

  absl::Status Start(const std::string& binary, const std::vector<std::string>& extra,
                     const std::filesystem::path& log_file, absl::Duration timeout) {
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("pipe");
    std::vector<std::string> args = {binary, "--listen", "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = Spawn(args, log_file, out[1]);
    close(out[1]);
    if (pid_ < 0) {
      close(out[0]);
      return absl::InternalError("fork");
    }
    stdout_fd_ = out[0];
    const std::string prefix = "debugplane-server listening on port ";
    std::string line;
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      pollfd p{stdout_fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char c;
      if (read(stdout_fd_, &c, 1) != 1) break;
      if (c != '\n') {
        line.push_back(c);
        continue;
      }
      if (line.rfind(prefix, 0) == 0 && absl::SimpleAtoi(line.substr(prefix.size()), &port_)) {
        return absl::OkStatus();
      }
      line.clear();
    }
    return absl::DeadlineExceededError(absl::StrCat(binary, " did not report its port within ",
                                                    absl::FormatDuration(timeout), "; see ",
                                                    log_file.string()));
  }

  // SIGTERM, then SIGKILL if it has not exited within `timeout`. Returns
  // false if it had to be killed.
  bool Stop(absl::Duration timeout) {
    if (pid_ <= 0) return true;
    kill(pid_, SIGTERM);
    bool clean = WaitFor(pid_, timeout).has_value();
    if (!clean) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
    if (stdout_fd_ >= 0) close(stdout_fd_);
    stdout_fd_ = -1;
    return clean;
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  int port_ = 0;
};

}  // namespace debugplane::bench

#endif  // DEBUGPLANE_BENCH_BENCH_PROCESSES_H_
