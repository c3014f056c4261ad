#include "rules_engine/scheduling/custom_evaluator.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "rules_engine/scheduling/evaluator_process.h"
#include "spdlog/spdlog.h"

namespace debugplane::rules_engine {
namespace {

// Steady, unlike absl::Now(): a wall-clock jump must neither kill an
// evaluator early nor let it run past its limit.
using Clock = std::chrono::steady_clock;

// Reads per output pipe per loop turn: a process that prints without pause
// must not starve the others (poll() comes back at once for it anyway).
constexpr int kReadsPerTurn = 4;
// Reads after the process has exited and its group was killed: what is left
// in the pipe, bounded in case something outside the group still writes.
constexpr int kDrainReads = 256;
// Without a pidfd (kernels before 5.3) or eventfd, how often the loop checks.
constexpr int kFallbackTickMs = 20;

Clock::time_point After(Clock::time_point now, absl::Duration duration) {
  if (duration <= absl::ZeroDuration()) return now;
  // Includes absl::InfiniteDuration(), which no chrono duration can hold.
  if (duration >= absl::Hours(24 * 365 * 100)) return Clock::time_point::max();
  return now + std::chrono::duration_cast<Clock::duration>(absl::ToChronoNanoseconds(duration));
}

// Error details for `head` with the process's last lines, or saying there
// were none.
std::string WithOutput(const std::string& head, const std::vector<std::string>& lines) {
  if (lines.empty()) return internal::ComposeDetails(absl::StrCat(head, " (no output)"), lines);
  return internal::ComposeDetails(head, lines);
}

}  // namespace

std::map<std::string, std::string> CustomEvaluatorEnvironment(
    const std::string& training_job_name, const std::string& rule_configuration_name,
    const std::string& trial_path, const RuleParameters& parameters) {
  std::map<std::string, std::string> environment;
  environment["DP_TRAINING_JOB_NAME"] = training_job_name;
  environment["DP_RULE_CONFIGURATION_NAME"] = rule_configuration_name;
  environment["DP_TRIAL_PATH"] = trial_path;
  environment["DP_ISSUES_FOUND_EXIT_CODE"] = absl::StrCat(kEvaluatorExitIssuesFound);
  nlohmann::json all = nlohmann::json::object();
  for (const auto& [name, value] : parameters) {
    all[name] = value;
    std::string variable = "DP_RULE_PARAM_";
    for (char c : name) {
      const bool plain =
          (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
      variable.push_back(plain ? c : '_');
    }
    environment[variable] = value;
  }
  // Invalid UTF-8 in a parameter would make dump() throw: replace it.
  environment["DP_RULE_PARAMETERS"] =
      all.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return environment;
}

struct CustomEvaluatorRunner::Process {
  Process(CustomEvaluation evaluation_in,
          absl::AnyInvocable<void(CustomEvaluationResult) &&> done_in, int tail_lines)
      : evaluation(std::move(evaluation_in)), done(std::move(done_in)), output(tail_lines) {}
  ~Process() {
    if (pidfd >= 0) close(pidfd);
    if (output_fd >= 0) close(output_fd);
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  const std::string& name() const {
    static const std::string kUnnamed = "evaluator";
    if (!evaluation.description.empty()) return evaluation.description;
    return evaluation.argv.empty() ? kUnnamed : evaluation.argv[0];
  }

  uint64_t id = 0;
  CustomEvaluation evaluation;
  absl::AnyInvocable<void(CustomEvaluationResult) &&> done;
  internal::OutputTail output;
  pid_t pid = -1;
  int pidfd = -1;      // -1 without pidfd_open: the loop then polls waitid.
  int output_fd = -1;  // Read end of the stdout+stderr pipe; -1 after EOF.
  Clock::time_point started;
  Clock::time_point deadline = Clock::time_point::max();  // The time limit.
  Clock::time_point kill_at = Clock::time_point::max();   // SIGKILL due.
  bool terminating = false;                               // SIGTERM sent.
  bool killed = false;                                    // SIGKILL sent.
  bool cancelled = false;
  bool timed_out = false;
  bool maybe_exited = false;  // Its pidfd was readable.
  bool reaped_elsewhere = false;
  int wait_status = 0;
};

CustomEvaluatorRunner::CustomEvaluatorRunner(Options options)
    : options_([&] {
        options.max_concurrent = std::max(options.max_concurrent, 1);
        options.output_tail_lines = std::max(options.output_tail_lines, 0);
        return options;
      }()),
      base_environment_(internal::EvaluatorBaseEnvironment()) {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    spdlog::warn("custom evaluators: eventfd failed ({}); checking every {}ms instead",
                 internal::ErrnoText(errno), kFallbackTickMs);
  }
  supervisor_ = std::thread([this] { Loop(); });
}

CustomEvaluatorRunner::~CustomEvaluatorRunner() {
  Shutdown();
  if (wake_fd_ >= 0) close(wake_fd_);
}

uint64_t CustomEvaluatorRunner::Start(CustomEvaluation evaluation,
                                      absl::AnyInvocable<void(CustomEvaluationResult) &&> done) {
  // Declared before the lock: if refused, `done` is destroyed after unlock
  // (its captures' destructors may take the caller's locks).
  auto process =
      std::make_unique<Process>(std::move(evaluation), std::move(done), options_.output_tail_lines);
  uint64_t id;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      spdlog::warn("custom evaluator for {} not started: the runner is shut down", process->name());
      return 0;
    }
    id = next_id_++;
    process->id = id;
    submitted_.push_back(std::move(process));
  }
  Wake();
  return id;
}

void CustomEvaluatorRunner::Cancel(uint64_t id) {
  if (id == 0) return;
  {
    absl::MutexLock lock(&mu_);
    // After Shutdown everything is being cancelled anyway.
    if (stopping_) return;
    cancel_requests_.push_back(id);
  }
  Wake();
}

void CustomEvaluatorRunner::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      while (!joined_) joined_cv_.Wait(&mu_);
      return;
    }
    stopping_ = true;
  }
  Wake();
  if (supervisor_.joinable()) supervisor_.join();
  absl::MutexLock lock(&mu_);
  joined_ = true;
  joined_cv_.SignalAll();
}

void CustomEvaluatorRunner::Wake() {
  if (wake_fd_ < 0) return;
  const uint64_t one = 1;
  // Can only fail if the counter would overflow: it is then readable anyway.
  [[maybe_unused]] ssize_t written = write(wake_fd_, &one, sizeof(one));
}

void CustomEvaluatorRunner::Loop() {
  bool stopping = false;
  std::vector<pollfd> fds;
  std::vector<PollOwner> owners;
  while (true) {
    TakeRequests(stopping);
    if (!stopping) StartQueued();
    CheckDeadlines();
    if (stopping && running_.empty() && queued_.empty()) break;
    const int timeout_ms = WatchRunning(fds, owners);
    if (poll(fds.data(), fds.size(), timeout_ms) < 0) {
      if (errno != EINTR) {
        spdlog::error("custom evaluators: poll failed: {}", internal::ErrnoText(errno));
        // Should not happen (EINVAL/ENOMEM); avoid a busy loop.
        std::this_thread::sleep_for(std::chrono::milliseconds(kFallbackTickMs));
      }
      continue;
    }
    HandlePollEvents(fds, owners);
    FinishExited();
  }
}

int CustomEvaluatorRunner::WatchRunning(std::vector<pollfd>& fds, std::vector<PollOwner>& owners) {
  fds.clear();
  owners.clear();
  if (wake_fd_ >= 0) fds.push_back({wake_fd_, POLLIN, 0});
  bool tick = wake_fd_ < 0;
  Clock::time_point next = Clock::time_point::max();
  for (auto& [id, process] : running_) {
    if (process->output_fd >= 0) {
      fds.push_back({process->output_fd, POLLIN, 0});
      owners.push_back({process.get(), /*is_output=*/true});
    }
    if (process->pidfd >= 0) {
      fds.push_back({process->pidfd, POLLIN, 0});
      owners.push_back({process.get(), /*is_output=*/false});
    } else {
      tick = true;
    }
    next = std::min({next, process->deadline, process->kill_at});
  }
  int timeout_ms = -1;
  if (next != Clock::time_point::max()) {
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now()).count();
    timeout_ms = static_cast<int>(std::clamp<int64_t>(wait, 0, INT_MAX));
  }
  if (tick && (timeout_ms < 0 || timeout_ms > kFallbackTickMs)) timeout_ms = kFallbackTickMs;
  return timeout_ms;
}

void CustomEvaluatorRunner::HandlePollEvents(const std::vector<pollfd>& fds,
                                             const std::vector<PollOwner>& owners) {
  size_t index = 0;
  if (wake_fd_ >= 0) {
    if (fds[0].revents & POLLIN) {
      uint64_t value;
      [[maybe_unused]] ssize_t got = read(wake_fd_, &value, sizeof(value));
    }
    index = 1;
  }
  for (size_t k = 0; index + k < fds.size(); ++k) {
    if (fds[index + k].revents == 0) continue;
    const PollOwner& owner = owners[k];
    if (owner.is_output) {
      ReadOutput(*owner.process, /*drain=*/false);
    } else {
      owner.process->maybe_exited = true;
    }
  }
}

void CustomEvaluatorRunner::FinishExited() {
  // A process is done when it has exited, not when its pipe closes: its
  // children may hold the pipe, or it may close stdout early.
  std::vector<uint64_t> ids;
  for (auto& [id, process] : running_) {
    if (process->maybe_exited || process->pidfd < 0) ids.push_back(id);
  }
  for (uint64_t id : ids) {
    auto it = running_.find(id);
    it->second->maybe_exited = false;
    if (!ReapIfExited(*it->second)) continue;
    std::unique_ptr<Process> process = std::move(it->second);
    running_.erase(it);
    ReadOutput(*process, /*drain=*/true);
    CustomEvaluationResult result = Outcome(*process);
    Finish(std::move(process), std::move(result));
  }
}

CustomEvaluationResult CustomEvaluatorRunner::Outcome(const Process& process) {
  CustomEvaluationResult result;
  result.cancelled = process.cancelled;
  const int status = process.wait_status;
  if (process.reaped_elsewhere) {
    // Unknown status: neither exit code nor signal.
  } else if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.term_signal = WTERMSIG(status);
  }
  const std::vector<std::string> lines = process.output.Lines();
  if (process.cancelled) {
    result.verdict = RuleVerdict::Error(WithOutput("evaluator stopped", lines));
  } else if (process.timed_out) {
    result.verdict = RuleVerdict::Error(WithOutput(
        absl::StrCat("evaluator killed after ", absl::FormatDuration(process.evaluation.time_limit),
                     " (its time limit)"),
        lines));
  } else if (result.exit_code == 0) {
    result.verdict =
        RuleVerdict::NoIssues(lines.empty() ? std::string("evaluator exited 0")
                                            : internal::ComposeDetails("", {lines.back()}));
  } else if (result.exit_code == kEvaluatorExitIssuesFound) {
    result.verdict = RuleVerdict::Issues(
        lines.empty() ? absl::StrCat("evaluator exited ", kEvaluatorExitIssuesFound,
                                     " (IssuesFound) without output")
                      : internal::ComposeDetails("", lines));
  } else if (result.exit_code > 0) {
    result.verdict = RuleVerdict::Error(
        WithOutput(absl::StrCat("evaluator exited with code ", result.exit_code), lines));
  } else if (result.term_signal != 0) {
    result.verdict = RuleVerdict::Error(WithOutput(
        absl::StrCat("evaluator killed by signal ", internal::SignalText(result.term_signal)),
        lines));
  } else {
    result.verdict = RuleVerdict::Error(
        WithOutput("evaluator ended with an unknown status (reaped outside the runner)", lines));
  }
  return result;
}

void CustomEvaluatorRunner::TakeRequests(bool& stopping) {
  std::vector<std::unique_ptr<Process>> submitted;
  std::vector<uint64_t> cancels;
  bool stop;
  {
    absl::MutexLock lock(&mu_);
    submitted.swap(submitted_);
    cancels.swap(cancel_requests_);
    stop = stopping_;
  }
  for (auto& process : submitted) queued_.push_back(std::move(process));
  auto cancel_queued = [this](std::unique_ptr<Process> process) {
    CustomEvaluationResult result;
    result.cancelled = true;
    result.verdict = RuleVerdict::Error("evaluator stopped before it started");
    Finish(std::move(process), std::move(result));
  };
  for (uint64_t id : cancels) {
    auto queued = std::find_if(queued_.begin(), queued_.end(),
                               [id](const auto& process) { return process->id == id; });
    if (queued != queued_.end()) {
      std::unique_ptr<Process> process = std::move(*queued);
      queued_.erase(queued);
      cancel_queued(std::move(process));
      continue;
    }
    if (auto running = running_.find(id); running != running_.end()) {
      Terminate(*running->second, /*cancelled=*/true);
    }
  }
  if (stop && !stopping) {
    stopping = true;
    if (!running_.empty() || !queued_.empty()) {
      spdlog::info("custom evaluators: stopping {} running and {} queued", running_.size(),
                   queued_.size());
    }
    std::deque<std::unique_ptr<Process>> queued;
    queued.swap(queued_);
    for (auto& process : queued) cancel_queued(std::move(process));
    for (auto& [id, process] : running_) Terminate(*process, /*cancelled=*/true);
  }
}

void CustomEvaluatorRunner::StartQueued() {
  while (!queued_.empty() && running_.size() < static_cast<size_t>(options_.max_concurrent)) {
    std::unique_ptr<Process> process = std::move(queued_.front());
    queued_.pop_front();
    Launch(std::move(process));
  }
}

void CustomEvaluatorRunner::Launch(std::unique_ptr<Process> process) {
  const CustomEvaluation& evaluation = process->evaluation;
  absl::StatusOr<internal::SpawnedEvaluator> spawned =
      internal::SpawnEvaluator(evaluation, base_environment_);
  if (!spawned.ok()) {
    CustomEvaluationResult result;
    result.verdict = RuleVerdict::Error(internal::ComposeDetails(spawned.status().message(), {}));
    return Finish(std::move(process), std::move(result));
  }
  const pid_t pid = spawned->pid;
  process->pid = pid;
  process->output_fd = spawned->output_fd;
  if (options_.use_pidfd) {
    process->pidfd = internal::OpenPidfd(pid);
    if (process->pidfd < 0) {
      spdlog::debug("custom evaluators: pidfd_open: {}; polling for the exit of pid {}",
                    internal::ErrnoText(errno), pid);
    }
  }
  process->started = Clock::now();
  process->deadline = After(process->started, evaluation.time_limit);
  spdlog::info("custom evaluator for {} started: {} (pid {})", process->name(),
               absl::StrJoin(evaluation.argv, " "), pid);
  const uint64_t id = process->id;
  running_.emplace(id, std::move(process));
}

void CustomEvaluatorRunner::Terminate(Process& process, bool cancelled) {
  if (cancelled) {
    process.cancelled = true;
  } else {
    process.timed_out = true;
  }
  if (process.terminating) return;
  process.terminating = true;
  internal::SignalGroup(process.pid, SIGTERM);
  process.kill_at = After(Clock::now(), options_.kill_grace);
}

void CustomEvaluatorRunner::CheckDeadlines() {
  const Clock::time_point now = Clock::now();
  for (auto& [id, process] : running_) {
    if (!process->terminating && now >= process->deadline) {
      spdlog::warn("custom evaluator for {} exceeded its time limit of {}: stopping it",
                   process->name(), absl::FormatDuration(process->evaluation.time_limit));
      Terminate(*process, /*cancelled=*/false);
    } else if (process->terminating && !process->killed && now >= process->kill_at) {
      spdlog::warn("custom evaluator for {} still running {} after SIGTERM: killing it",
                   process->name(), absl::FormatDuration(options_.kill_grace));
      internal::SignalGroup(process->pid, SIGKILL);
      process->killed = true;
      process->kill_at = Clock::time_point::max();
    }
  }
}

void CustomEvaluatorRunner::ReadOutput(Process& process, bool drain) {
  internal::ReadAvailableOutput(&process.output_fd, drain ? kDrainReads : kReadsPerTurn,
                                process.output);
}

bool CustomEvaluatorRunner::ReapIfExited(Process& process) {
  const internal::ExitCheck check = internal::ReapIfExited(process.pid);
  switch (check.state) {
    case internal::ExitCheck::kRunning:
      return false;
    case internal::ExitCheck::kReapedElsewhere:
      spdlog::error("custom evaluator for {} (pid {}) was reaped elsewhere: {}", process.name(),
                    process.pid, internal::ErrnoText(check.error));
      process.reaped_elsewhere = true;
      return true;
    case internal::ExitCheck::kExited:
      process.wait_status = check.wait_status;
      return true;
  }
  return true;
}

void CustomEvaluatorRunner::Finish(std::unique_ptr<Process> process,
                                   CustomEvaluationResult result) {
  static constexpr const char* kKinds[] = {"Continue", "IssuesFound", "NoIssuesFound", "Error"};
  const std::string& details = result.verdict.details;
  const std::string first_line = details.substr(0, details.find('\n'));
  if (process->pid > 0) {
    const double seconds = std::chrono::duration<double>(Clock::now() - process->started).count();
    spdlog::info(
        "custom evaluator for {} (pid {}) finished after {:.1f}s{}: {}: {} ({} bytes of "
        "output)",
        process->name(), process->pid, seconds, result.cancelled ? ", stopped" : "",
        kKinds[static_cast<int>(result.verdict.kind)], first_line, process->output.bytes_seen());
  } else {
    spdlog::info("custom evaluator for {} not run{}: {}", process->name(),
                 result.cancelled ? " (stopped)" : "", first_line);
  }
  if (process->done) std::move(process->done)(std::move(result));
}

}  // namespace debugplane::rules_engine
