// Runs the real `debugplane-agent run` binary for end-to-end tests, with its
// stderr in a file and, optionally, its own working directory (which the
// agent may write into) and environment variables (e.g. its TMPDIR).

#ifndef DEBUGPLANE_TESTS_SERVICE_AGENT_PROCESS_H_
#define DEBUGPLANE_TESTS_SERVICE_AGENT_PROCESS_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/support/wait_until.h"

namespace debugplane::testing {

inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// `debugplane-agent run <agent_args> -- <command>` as a child process.
class AgentProcess {
 public:
  // `working_directory`: where the agent runs ("" = the test's own).
  // `environment`: variables set (overriding the test's) for the agent.
  AgentProcess(const std::vector<std::string>& agent_args, const std::vector<std::string>& command,
               const std::filesystem::path& log,
               const std::filesystem::path& working_directory = {},
               const std::vector<std::pair<std::string, std::string>>& environment = {})
      : log_(log) {
    std::vector<std::string> args = {DP_AGENT_BINARY, "run"};
    args.insert(args.end(), agent_args.begin(), agent_args.end());
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, STDERR_FILENO);
      if (!working_directory.empty() && chdir(working_directory.c_str()) != 0) _exit(126);
      for (const auto& [name, value] : environment) setenv(name.c_str(), value.c_str(), 1);
      std::vector<char*> argv;
      for (auto& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~AgentProcess() { Kill(); }
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  // The exit code, or -1 if it is still running after `timeout`.
  int Wait(absl::Duration timeout) {
    int status = 0;
    if (WaitUntil([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, timeout)) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    ADD_FAILURE() << "the agent did not exit; its log:\n" << log();
    return -1;
  }
  // True while the agent has not exited.
  bool running() const {
    if (pid_ <= 0) return false;
    siginfo_t info{};
    return waitid(P_PID, pid_, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0;
  }
  std::string log() const { return ReadFile(log_); }
  // Sends `signal_number` to the agent (only: not to what it started).
  void Signal(int signal_number) {
    if (pid_ > 0) kill(pid_, signal_number);
  }
  // kill -9 the agent (not what it started: the command is in its own
  // process group).
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  std::filesystem::path log_;
  pid_t pid_ = -1;
};

}  // namespace debugplane::testing

#endif  // DEBUGPLANE_TESTS_SERVICE_AGENT_PROCESS_H_
