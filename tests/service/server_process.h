// Runs the real debugplane-server binary for end-to-end tests: on loopback,
// on a free port, with its own data directory.

#ifndef DEBUGPLANE_TESTS_SERVICE_SERVER_PROCESS_H_
#define DEBUGPLANE_TESTS_SERVICE_SERVER_PROCESS_H_

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"

namespace debugplane::testing {

// A client context with a deadline `seconds` from now: no test call waits
// forever on a server that hangs.
inline std::unique_ptr<grpc::ClientContext> Context(int seconds = 10) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return context;
}

class ServerProcess {
 public:
  // Starts debugplane-server with `--listen <listen> --data-dir data_dir`
  // plus `extra_args`, and waits until it reports its port. `listen` is
  // 127.0.0.1:0 unless given (e.g. 0.0.0.0:0 for a server in a network
  // namespace of its own; address() is on its loopback all the same).
  ServerProcess(std::filesystem::path data_dir, std::vector<std::string> extra_args = {},
                std::string listen = "127.0.0.1:0")
      : data_dir_(std::move(data_dir)),
        extra_args_(std::move(extra_args)),
        initial_listen_(std::move(listen)),
        listen_(initial_listen_) {
    Start();
  }
  ~ServerProcess() { Kill(SIGKILL); }

  void Start() {
    int out[2];
    ASSERT_EQ(pipe(out), 0);
    std::vector<std::string> args = {DP_SERVER_BINARY,   "--listen",    listen_, "--data-dir",
                                     data_dir_.string(), "--log-level", "warn"};
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      close(out[1]);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    stdout_fd_ = out[0];
    // Read "debugplane-server listening on port N".
    std::string line;
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      pollfd p{stdout_fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char c;
      if (read(stdout_fd_, &c, 1) != 1) break;
      if (c != '\n') {
        line.push_back(c);
        continue;
      }
      const std::string http_prefix = "debugplane-server http listening on port ";
      if (line.rfind(http_prefix, 0) == 0) {
        EXPECT_TRUE(absl::SimpleAtoi(line.substr(http_prefix.size()), &http_port_)) << line;
        line.clear();
        continue;
      }
      const std::string prefix = "debugplane-server listening on port ";
      if (line.rfind(prefix, 0) == 0 && absl::SimpleAtoi(line.substr(prefix.size()), &port_)) {
        break;
      }
      line.clear();
    }
    ASSERT_GT(port_, 0) << "server did not start";
  }

  // Sends `signal` and reaps the process. Returns its exit status (as from
  // waitpid), or -1 if it was not running.
  int Kill(int signal) {
    if (pid_ <= 0) return -1;
    kill(pid_, signal);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    port_ = 0;
    http_port_ = 0;
    if (stdout_fd_ >= 0) close(stdout_fd_);
    stdout_fd_ = -1;
    return status;
  }

  // Sends `signal` (e.g. SIGHUP) without waiting for anything.
  void Signal(int signal) const {
    if (pid_ > 0) ::kill(pid_, signal);
  }

  void Restart() {
    Kill(SIGKILL);
    Start();
  }

  // kill -9, then start again on the same port (for clients that keep the
  // address, like the agent).
  void RestartOnSamePort() {
    listen_ = address();
    Kill(SIGKILL);
    Start();
    listen_ = initial_listen_;
  }

  bool running() const { return pid_ > 0 && ::kill(pid_, 0) == 0; }
  // The server's process id (for /proc/<pid>/status); -1 when not running.
  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  // The SageMaker HTTP port, when started with `--http-listen` (see
  // WithHttp()); else 0.
  int http_port() const { return http_port_; }
  std::string http_endpoint() const { return absl::StrCat("http://127.0.0.1:", http_port_); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

  std::shared_ptr<grpc::Channel> Channel() const {
    return grpc::CreateChannel(address(), grpc::InsecureChannelCredentials());
  }
  std::unique_ptr<v1::TrainingJobService::Stub> Stub() const {
    return v1::TrainingJobService::NewStub(Channel());
  }

 private:
  std::filesystem::path data_dir_;
  std::vector<std::string> extra_args_;
  std::string initial_listen_;
  std::string listen_;
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  int port_ = 0;
  int http_port_ = 0;
};

// Extra arguments that also serve the SageMaker API over HTTP on a free
// loopback port (ServerProcess::http_port()).
inline std::vector<std::string> WithHttp(std::vector<std::string> extra_args = {}) {
  extra_args.insert(extra_args.end(), {"--http-listen", "127.0.0.1:0"});
  return extra_args;
}

}  // namespace debugplane::testing

#endif  // DEBUGPLANE_TESTS_SERVICE_SERVER_PROCESS_H_
