#include "client/agent/training_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/agent/agent_signals.h"
#include "client/agent/clock_wait.h"

namespace debugplane::client {
namespace {

// Seconds with one decimal, as people read them: "0.4 s".
std::string Seconds(absl::Duration duration) {
  return absl::StrFormat("%.1f s", absl::ToDoubleSeconds(duration));
}

bool KilledAfterGrace(int wait_status, bool killed_after_grace) {
  return killed_after_grace && WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL;
}

// Whether the environment entry `entry` ("NAME=value") is one the training
// command does not get: the agent's own key to the control plane
// (DEBUGPLANE_TOKEN) is for the agent alone (an agent key may act for every
// job), and the configuration paths the agent sets itself.
bool KeptFromTheCommand(absl::string_view entry, bool tensorboard) {
  for (absl::string_view name :
       {"DEBUGPLANE_TOKEN=", "SMDEBUG_CONFIG_FILE_PATH=", "SMPROFILER_CONFIG_PATH="}) {
    if (absl::StartsWith(entry, name)) return true;
  }
  return tensorboard && (absl::StartsWith(entry, "DP_TENSORBOARD_DIR=") ||
                         absl::StartsWith(entry, "TENSORBOARD_LOGGING_DIR="));
}

}  // namespace

int TrainingExit::ExitCode() const {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

bool TrainingExit::SignalReachedIt() const {
  return terminate_sent_at.has_value() && *terminate_sent_at <= exited_at;
}

bool TrainingExit::Succeeded() const {
  return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
}

std::string DescribeExit(int wait_status) {
  if (WIFEXITED(wait_status)) {
    return absl::StrCat("the training command exited with code ", WEXITSTATUS(wait_status));
  }
  if (WIFSIGNALED(wait_status)) {
    return absl::StrCat("the training command was killed by signal ", WTERMSIG(wait_status), " (",
                        strsignal(WTERMSIG(wait_status)), ")");
  }
  return "the training command ended";
}

std::string DescribeStoppedExit(int wait_status, bool killed_after_grace,
                                absl::Duration since_stop_order, absl::Duration stop_grace) {
  const std::string when = absl::StrCat(Seconds(since_stop_order), " after the stop order");
  if (KilledAfterGrace(wait_status, killed_after_grace)) {
    return absl::StrCat("the training command did not exit within the ",
                        absl::FormatDuration(stop_grace),
                        " grace period after SIGTERM and was killed (SIGKILL, signal 9), ", when);
  }
  if (WIFSIGNALED(wait_status)) {
    return absl::StrCat("the training command was ended by signal ", WTERMSIG(wait_status), " (",
                        strsignal(WTERMSIG(wait_status)), ") after SIGTERM (signal 15), ", when);
  }
  if (WIFEXITED(wait_status)) {
    return absl::StrCat("the training command exited with code ", WEXITSTATUS(wait_status),
                        " after SIGTERM (signal 15), ", when);
  }
  return absl::StrCat("the training command ended after SIGTERM (signal 15), ", when);
}

std::string DescribeExitAfterAgentSignal(int agent_signal, int wait_status, bool killed_after_grace,
                                         absl::Duration since_signal, absl::Duration stop_grace) {
  const std::string passed_on = absl::StrCat("debugplane-agent received ", SignalName(agent_signal),
                                             " and passed it on to the training command, which ");
  const std::string when = absl::StrCat(Seconds(since_signal), " later");
  if (KilledAfterGrace(wait_status, killed_after_grace)) {
    return absl::StrCat(passed_on, "did not exit within the ", absl::FormatDuration(stop_grace),
                        " grace period and was killed (SIGKILL, signal 9), ", when);
  }
  if (WIFSIGNALED(wait_status)) {
    return absl::StrCat(passed_on, "was ended by signal ", WTERMSIG(wait_status), " (",
                        strsignal(WTERMSIG(wait_status)), ") ", when);
  }
  if (WIFEXITED(wait_status)) {
    return absl::StrCat(passed_on, "exited with code ", WEXITSTATUS(wait_status), " ", when);
  }
  return absl::StrCat(passed_on, "ended ", when);
}

std::vector<std::string> TrainingEnvironment(const char* const* environment,
                                             const std::string& hook_config_path,
                                             const std::string& profiler_config_path,
                                             const std::string& job,
                                             const std::string& tensorboard_dir) {
  const bool tensorboard = !tensorboard_dir.empty();
  std::vector<std::string> result;
  for (const char* const* entry = environment; *entry != nullptr; ++entry) {
    if (!KeptFromTheCommand(*entry, tensorboard)) result.emplace_back(*entry);
  }
  result.push_back(absl::StrCat("SMDEBUG_CONFIG_FILE_PATH=", hook_config_path));
  result.push_back(absl::StrCat("SMPROFILER_CONFIG_PATH=", profiler_config_path));
  result.push_back(absl::StrCat("DP_TRAINING_JOB_NAME=", job));
  if (tensorboard) {
    result.push_back(absl::StrCat("DP_TENSORBOARD_DIR=", tensorboard_dir));
    result.push_back(absl::StrCat("TENSORBOARD_LOGGING_DIR=", tensorboard_dir));
  }
  return result;
}

TrainingProcess::TrainingProcess(base::Clock& clock, absl::Duration stop_grace, std::ostream& log)
    : clock_(clock), stop_grace_(stop_grace), log_(log) {}

TrainingProcess::~TrainingProcess() {
  std::thread killer;
  {
    absl::MutexLock lock(&mu_);
    killer = std::move(killer_);
  }
  if (killer.joinable()) killer.join();
}

absl::Status TrainingProcess::Start(const std::vector<std::string>& command,
                                    const std::vector<std::string>& environment) {
  // Everything the child needs is prepared before fork: after it, only
  // async-signal-safe calls.
  std::vector<std::string> args = command;
  std::vector<std::string> env = environment;
  std::vector<char*> argv, envp;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  for (auto& entry : env) envp.push_back(entry.data());
  envp.push_back(nullptr);
  sigset_t none;
  sigemptyset(&none);
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);  // Its own group: a stop reaches what it started too.
    pthread_sigmask(SIG_SETMASK, &none, nullptr);
    execvpe(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  if (pid < 0) {
    const int error = errno;
    return absl::Status(absl::ErrnoToStatusCode(error), std::strerror(error));
  }
  setpgid(pid, pid);  // Also here, so a stop right after fork finds the group.
  absl::MutexLock lock(&mu_);
  pid_ = pid;
  return absl::OkStatus();
}

void TrainingProcess::Terminate(int signal_number, const std::string& why) {
  absl::MutexLock lock(&mu_);
  if (pid_ <= 0 || exit_.has_value() || killer_.joinable()) return;
  log_ << "debugplane-agent: stopping the training command (" << SignalName(signal_number)
       << " to its process group " << pid_ << "): " << why << "\n";
  terminate_sent_at_ = clock_.Now();
  kill(-pid_, signal_number);
  const pid_t pid = pid_;
  const absl::Time deadline = *terminate_sent_at_ + stop_grace_;
  killer_ = std::thread([this, pid, signal_number, deadline] {
    absl::MutexLock lock(&mu_);
    while (!exit_.has_value() && !WaitOnClock(exited_, mu_, clock_, deadline)) {
    }
    if (exit_.has_value()) return;
    log_ << "debugplane-agent: the training command did not exit within "
         << absl::FormatDuration(stop_grace_) << " of " << SignalName(signal_number)
         << "; killing it\n";
    kill_sent_ = true;
    kill(-pid, SIGKILL);
  });
}

void TrainingProcess::PassOn(int signal_number) {
  absl::MutexLock lock(&mu_);
  if (pid_ > 0 && !exit_.has_value()) kill(-pid_, signal_number);
}

bool TrainingProcess::Running() const {
  absl::MutexLock lock(&mu_);
  return pid_ > 0 && !exit_.has_value();
}

TrainingExit TrainingProcess::Wait() {
  pid_t pid;
  {
    absl::MutexLock lock(&mu_);
    pid = pid_;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  TrainingExit exit{.wait_status = status, .exited_at = clock_.Now()};
  absl::MutexLock lock(&mu_);
  exit.terminate_sent_at = terminate_sent_at_;
  exit.killed_after_grace = kill_sent_;
  exit_ = exit;
  exited_.SignalAll();
  return exit;
}

}  // namespace debugplane::client
