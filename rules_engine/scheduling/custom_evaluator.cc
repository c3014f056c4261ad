#include "rules_engine/scheduling/custom_evaluator.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace debugplane::rules_engine {
namespace {

// Steady, unlike absl::Now(): a wall-clock jump must neither kill an
// evaluator early nor let it run past its limit.
using Clock = std::chrono::steady_clock;

constexpr size_t kReadChunk = 64 * 1024;
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

bool IsBlankByte(char c) { return c == ' ' || c == '\t'; }

bool IsBlank(absl::string_view text) { return std::all_of(text.begin(), text.end(), IsBlankByte); }

// What OutputTail keeps of the raw line `segment` (without its '\n'): a
// trailing '\r' belongs to a CRLF line end; an earlier one starts the line
// over.
absl::string_view VisiblePart(absl::string_view segment) {
  if (!segment.empty() && segment.back() == '\r') segment.remove_suffix(1);
  const size_t cr = segment.rfind('\r');
  if (cr != absl::string_view::npos) segment.remove_prefix(cr + 1);
  return segment;
}

// The longest prefix of valid UTF-8 `text` of at most `max` bytes that does
// not end inside a character.
absl::string_view CutUtf8(absl::string_view text, size_t max) {
  if (text.size() <= max) return text;
  size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

// `raw` without a trailing incomplete UTF-8 sequence (left by cutting a line
// at a byte limit): better dropped than shown as '?'.
absl::string_view DropIncompleteTail(absl::string_view raw) {
  for (size_t back = 1; back <= 4 && back <= raw.size(); ++back) {
    const unsigned char c = static_cast<unsigned char>(raw[raw.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // Continuation byte: look further back.
    const size_t length = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (length > back) raw.remove_suffix(back);
    break;
  }
  return raw;
}

std::string TrimTrailingBlanks(std::string text) {
  while (!text.empty() && IsBlankByte(text.back())) text.pop_back();
  return text;
}

// Error details for `head` with the process's last lines, or saying there
// were none.
std::string WithOutput(const std::string& head, const std::vector<std::string>& lines) {
  if (lines.empty()) return internal::ComposeDetails(absl::StrCat(head, " (no output)"), lines);
  return internal::ComposeDetails(head, lines);
}

}  // namespace

namespace internal {

std::string SanitizeUtf8(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      const bool control = (c < 0x20 && c != '\t' && c != '\n') || c == 0x7F;
      out.push_back(control ? '?' : static_cast<char>(c));
      ++i;
      continue;
    }
    // The well-formed sequences of Unicode 15 table 3-7: no overlong forms,
    // no surrogates, nothing above U+10FFFF (what protobuf accepts).
    size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      length = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      length = 3;
      if (c == 0xE0) low = 0xA0;
      if (c == 0xED) high = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      length = 4;
      if (c == 0xF0) low = 0x90;
      if (c == 0xF4) high = 0x8F;
    }
    bool valid = length > 0 && i + length <= text.size();
    for (size_t k = 1; valid && k < length; ++k) {
      const unsigned char next = static_cast<unsigned char>(text[i + k]);
      valid = k == 1 ? (next >= low && next <= high) : (next & 0xC0) == 0x80;
    }
    if (valid) {
      out.append(text.data() + i, length);
      i += length;
    } else {
      out.push_back('?');
      ++i;
    }
  }
  return out;
}

std::string ComposeDetails(absl::string_view head, const std::vector<std::string>& lines) {
  std::string text = SanitizeUtf8(head);
  if (lines.empty()) {
    if (text.size() > kEvaluatorMaxDetails) {
      text = absl::StrCat(CutUtf8(text, kEvaluatorMaxDetails - 3), "...");
    }
    return text;
  }
  // The head is short in practice; leave the output at least half.
  constexpr size_t kMaxHead = kEvaluatorMaxDetails / 2;
  if (text.size() > kMaxHead) text = absl::StrCat(CutUtf8(text, kMaxHead - 3), "...");
  if (!text.empty()) text += ":\n";
  constexpr absl::string_view kOmitted = "...\n";
  const size_t budget = kEvaluatorMaxDetails - text.size();

  std::vector<std::string> clean;
  clean.reserve(lines.size());
  for (const std::string& line : lines) clean.push_back(SanitizeUtf8(line));
  // Newest first, while they fit (keeping room for kOmitted while older
  // lines remain).
  size_t first = clean.size();
  size_t used = 0;
  while (first > 0) {
    const size_t need = clean[first - 1].size() + (used > 0 ? 1 : 0);
    const size_t marker = first - 1 > 0 ? kOmitted.size() : 0;
    if (used + need + marker > budget) break;
    used += need;
    --first;
  }
  if (first == clean.size()) {
    // Not even the newest line fits whole: cut it.
    const size_t marker = clean.size() > 1 ? kOmitted.size() : 0;
    if (marker > 0) absl::StrAppend(&text, kOmitted);
    return absl::StrCat(text, CutUtf8(clean.back(), budget - marker - 3), "...");
  }
  if (first > 0) absl::StrAppend(&text, kOmitted);
  absl::StrAppend(&text, absl::StrJoin(clean.begin() + first, clean.end(), "\n"));
  return text;
}

OutputTail::OutputTail(int max_lines) : max_lines_(static_cast<size_t>(std::max(max_lines, 0))) {}

void OutputTail::Append(absl::string_view data) {
  bytes_seen_ += data.size();
  if (max_lines_ == 0) return;
  // Only the last max_lines_ non-blank complete lines of `data` can survive
  // it: skip everything before them without looking at it (an evaluator
  // printing gigabytes costs one backward scan per chunk, no allocations).
  const size_t last_newline = data.rfind('\n');
  if (last_newline != absl::string_view::npos) {
    size_t count = 0;
    size_t end = last_newline;  // The segment is [start, end).
    while (true) {
      const size_t previous = end == 0 ? absl::string_view::npos : data.rfind('\n', end - 1);
      const size_t start = previous == absl::string_view::npos ? 0 : previous + 1;
      if (!IsBlank(VisiblePart(data.substr(start, end - start))) && ++count == max_lines_) {
        if (start > 0) {
          // The lines kept so far and the current one end before `start`.
          lines_.clear();
          ResetLine();
          data.remove_prefix(start);
        }
        break;
      }
      if (previous == absl::string_view::npos) break;
      end = previous;
    }
  }
  size_t pos = 0;
  while (pos < data.size()) {
    if (pending_cr_) {
      pending_cr_ = false;
      if (data[pos] != '\n') ResetLine();  // A lone '\r': the line starts over.
    }
    const size_t hit = data.find_first_of("\r\n", pos);
    const size_t end = hit == absl::string_view::npos ? data.size() : hit;
    AppendToLine(data.substr(pos, end - pos));
    if (hit == absl::string_view::npos) break;
    if (data[hit] == '\n') {
      CompleteLine();
    } else {
      pending_cr_ = true;
    }
    pos = hit + 1;
  }
}

void OutputTail::AppendToLine(absl::string_view text) {
  if (partial_.empty()) {
    // Leading blanks are dropped as they come, so that a long run of them
    // cannot fill the line before its text.
    while (!text.empty() && IsBlankByte(text.front())) text.remove_prefix(1);
  }
  if (text.empty()) return;
  const size_t room = kMaxLineBytes - partial_.size();
  if (text.size() > room) {
    partial_.append(text.data(), room);
    partial_cut_ = true;
  } else {
    partial_.append(text.data(), text.size());
  }
}

namespace {
std::string MakeLine(const std::string& raw, bool cut) {
  std::string line =
      TrimTrailingBlanks(SanitizeUtf8(cut ? DropIncompleteTail(raw) : absl::string_view(raw)));
  if (cut) line += "...";
  return line;
}
}  // namespace

void OutputTail::CompleteLine() {
  if (!partial_.empty()) {
    lines_.push_back(MakeLine(partial_, partial_cut_));
    if (lines_.size() > max_lines_) lines_.pop_front();
  }
  ResetLine();
}

void OutputTail::ResetLine() {
  partial_.clear();
  partial_cut_ = false;
  pending_cr_ = false;
}

std::vector<std::string> OutputTail::Lines() const {
  std::vector<std::string> lines(lines_.begin(), lines_.end());
  if (!partial_.empty()) {
    lines.push_back(MakeLine(partial_, partial_cut_));
    if (lines.size() > max_lines_) lines.erase(lines.begin());
  }
  return lines;
}

}  // namespace internal

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

namespace {

std::vector<std::pair<std::string, std::string>> BaseEnvironment() {
  std::vector<std::pair<std::string, std::string>> base;
  const char* path = std::getenv("PATH");
  base.emplace_back("PATH",
                    path != nullptr && *path != '\0' ? path : "/usr/local/bin:/usr/bin:/bin");
  for (const char* name : {"HOME", "LANG"}) {
    if (const char* value = std::getenv(name); value != nullptr) base.emplace_back(name, value);
  }
  return base;
}

// Sends `signal` to the process group of `pid` (the evaluator and whatever
// it started), or to `pid` alone if it left its group.
void SignalGroup(pid_t pid, int signal) {
  if (kill(-pid, signal) != 0) kill(pid, signal);
}

}  // namespace

CustomEvaluatorRunner::CustomEvaluatorRunner(Options options)
    : options_([&] {
        options.max_concurrent = std::max(options.max_concurrent, 1);
        options.output_tail_lines = std::max(options.output_tail_lines, 0);
        return options;
      }()),
      base_environment_(BaseEnvironment()) {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    spdlog::warn("custom evaluators: eventfd failed ({}); checking every {}ms instead",
                 ErrnoText(errno), kFallbackTickMs);
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
  // For each entry of `fds` after the eventfd: its process and whether it is
  // the output pipe (else the pidfd).
  std::vector<std::pair<Process*, bool>> owners;
  std::vector<uint64_t> ids;
  while (true) {
    TakeRequests(stopping);
    if (!stopping) StartQueued();
    CheckDeadlines();
    if (stopping && running_.empty() && queued_.empty()) break;

    fds.clear();
    owners.clear();
    if (wake_fd_ >= 0) fds.push_back({wake_fd_, POLLIN, 0});
    bool tick = wake_fd_ < 0;
    Clock::time_point next = Clock::time_point::max();
    for (auto& [id, process] : running_) {
      if (process->output_fd >= 0) {
        fds.push_back({process->output_fd, POLLIN, 0});
        owners.emplace_back(process.get(), true);
      }
      if (process->pidfd >= 0) {
        fds.push_back({process->pidfd, POLLIN, 0});
        owners.emplace_back(process.get(), false);
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

    if (poll(fds.data(), fds.size(), timeout_ms) < 0) {
      if (errno != EINTR) {
        spdlog::error("custom evaluators: poll failed: {}", ErrnoText(errno));
        // Should not happen (EINVAL/ENOMEM); avoid a busy loop.
        std::this_thread::sleep_for(std::chrono::milliseconds(kFallbackTickMs));
      }
      continue;
    }
    size_t index = 0;
    if (wake_fd_ >= 0) {
      if (fds[0].revents & POLLIN) {
        uint64_t value;
        [[maybe_unused]] ssize_t got = read(wake_fd_, &value, sizeof(value));
      }
      index = 1;
    }
    for (size_t k = 0; index + k < fds.size(); ++k) {
      auto [process, is_output] = owners[k];
      if (fds[index + k].revents == 0) continue;
      if (is_output) {
        ReadOutput(*process, /*drain=*/false);
      } else {
        process->maybe_exited = true;
      }
    }
    // A process is done when it has exited, not when its pipe closes: its
    // children may hold the pipe, or it may close stdout early.
    ids.clear();
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

      CustomEvaluationResult result;
      result.cancelled = process->cancelled;
      const int status = process->wait_status;
      if (process->reaped_elsewhere) {
        // Unknown status: neither exit code nor signal.
      } else if (WIFEXITED(status)) {
        result.exit_code = WEXITSTATUS(status);
      } else if (WIFSIGNALED(status)) {
        result.term_signal = WTERMSIG(status);
      }
      const std::vector<std::string> lines = process->output.Lines();
      if (process->cancelled) {
        result.verdict = RuleVerdict::Error(WithOutput("evaluator stopped", lines));
      } else if (process->timed_out) {
        result.verdict = RuleVerdict::Error(WithOutput(
            absl::StrCat("evaluator killed after ",
                         absl::FormatDuration(process->evaluation.time_limit), " (its time limit)"),
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
            absl::StrCat("evaluator killed by signal ", SignalText(result.term_signal)), lines));
      } else {
        result.verdict = RuleVerdict::Error(WithOutput(
            "evaluator ended with an unknown status (reaped outside the runner)", lines));
      }
      Finish(std::move(process), std::move(result));
    }
  }
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
  auto fail = [&](std::string details) {
    CustomEvaluationResult result;
    result.verdict = RuleVerdict::Error(internal::ComposeDetails(details, {}));
    Finish(std::move(process), std::move(result));
  };
  if (evaluation.argv.empty() || evaluation.argv[0].empty()) {
    return fail("evaluator has no command");
  }
  const std::string& path = evaluation.argv[0];
  if (path[0] != '/') {
    return fail(absl::StrCat("cannot run evaluator ", path, ": not an absolute path"));
  }
  std::map<std::string, std::string> merged(base_environment_.begin(), base_environment_.end());
  for (const auto& [name, value] : evaluation.environment) {
    if (name.empty() || name.find('=') != std::string::npos ||
        name.find('\0') != std::string::npos) {
      return fail(absl::StrCat("cannot run evaluator ", path,
                               ": invalid environment variable name '", name, "'"));
    }
    merged[name] = value;
  }
  std::vector<std::string> environment_strings;
  environment_strings.reserve(merged.size());
  for (const auto& [name, value] : merged) environment_strings.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (std::string& entry : environment_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_strings = evaluation.argv;
  std::vector<char*> argv;
  for (std::string& arg : argv_strings) argv.push_back(arg.data());
  argv.push_back(nullptr);

  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return fail(absl::StrCat("cannot run evaluator ", path, ": pipe: ", ErrnoText(errno)));
  }
  fcntl(pipe_fds[0], F_SETFL, fcntl(pipe_fds[0], F_GETFL) | O_NONBLOCK);

  // posix_spawn rather than fork: no copy of a large server's page tables,
  // nothing but libc runs in the child, and glibc reports an exec failure
  // (missing file, not executable) as its return value.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  if (!evaluation.working_directory.empty()) {
    posix_spawn_file_actions_addchdir_np(&actions, evaluation.working_directory.c_str());
  }
  // The server's sockets, database and other descriptors (some may lack
  // O_CLOEXEC) must not leak into a program it does not control.
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);

  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  // A process group of its own: signals reach the evaluator's children too,
  // and a terminal's Ctrl-C to the server does not reach the evaluator.
  posix_spawnattr_setpgroup(&attributes, 0);
  // The server may block or ignore signals (e.g. SIGPIPE, SIGTERM in worker
  // threads); the evaluator starts with the defaults.
  sigset_t empty_mask;
  sigemptyset(&empty_mask);
  posix_spawnattr_setsigmask(&attributes, &empty_mask);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int signal = 1; signal < 32; ++signal) {
    if (signal != SIGKILL && signal != SIGSTOP) sigaddset(&defaults, signal);
  }
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setflags(&attributes,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  pid_t pid = -1;
  const int spawn_error =
      posix_spawn(&pid, path.c_str(), &actions, &attributes, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(pipe_fds[1]);
  if (spawn_error != 0) {
    close(pipe_fds[0]);
    const std::string where = evaluation.working_directory.empty()
                                  ? std::string()
                                  : absl::StrCat(" in ", evaluation.working_directory);
    return fail(absl::StrCat("cannot run evaluator ", path, where, ": ", ErrnoText(spawn_error)));
  }
  process->pid = pid;
  process->output_fd = pipe_fds[0];
  // The child is ours and not yet reaped, so its pid cannot be reused before
  // pidfd_open: no race.
  // pidfd_open sets close-on-exec itself.
  if (options_.use_pidfd) {
    process->pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (process->pidfd < 0) {
      spdlog::debug("custom evaluators: pidfd_open: {}; polling for the exit of pid {}",
                    ErrnoText(errno), pid);
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
  SignalGroup(process.pid, SIGTERM);
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
      SignalGroup(process->pid, SIGKILL);
      process->killed = true;
      process->kill_at = Clock::time_point::max();
    }
  }
}

void CustomEvaluatorRunner::ReadOutput(Process& process, bool drain) {
  if (process.output_fd < 0) return;
  char buffer[kReadChunk];
  for (int reads = 0; reads < (drain ? kDrainReads : kReadsPerTurn);) {
    const ssize_t got = read(process.output_fd, buffer, sizeof(buffer));
    if (got > 0) {
      process.output.Append(absl::string_view(buffer, static_cast<size_t>(got)));
      ++reads;
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // EOF (every writer is gone) or an error: nothing more to read.
    close(process.output_fd);
    process.output_fd = -1;
    return;
  }
}

bool CustomEvaluatorRunner::ReapIfExited(Process& process) {
  // WNOWAIT: look without reaping, so that the pid (the group's id) stays
  // reserved while the group is killed below.
  siginfo_t info{};
  int rc;
  do {
    rc = waitid(P_PID, static_cast<id_t>(process.pid), &info, WEXITED | WNOHANG | WNOWAIT);
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) {
    // ECHILD: someone else reaped it (SIGCHLD ignored, or waitpid(-1)).
    spdlog::error("custom evaluator for {} (pid {}) was reaped elsewhere: {}", process.name(),
                  process.pid, ErrnoText(errno));
    process.reaped_elsewhere = true;
    return true;
  }
  if (info.si_pid == 0) return false;
  // Whatever the evaluator left running in its group goes with it.
  kill(-process.pid, SIGKILL);
  int status = 0;
  while (waitpid(process.pid, &status, 0) < 0 && errno == EINTR) {
  }
  process.wait_status = status;
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
