#include "rules_engine/scheduling/rule_status_recorder.h"

#include <algorithm>
#include <deque>
#include <map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/deadline_timer.h"
#include "spdlog/spdlog.h"

namespace debugplane::rules_engine {
namespace {

// Refusals a retry cannot change.
bool IsFinal(const absl::Status& result) {
  return result.ok() || absl::IsNotFound(result) || absl::IsFailedPrecondition(result) ||
         absl::IsInvalidArgument(result);
}

// Whether the committed record already has `rule` of `job` in `status`: a
// record sent again (an evaluation that replayed its steps) changes nothing,
// and must not be counted as a new detection.
bool AlreadyRecorded(const core::TrainingJobManager& manager, const std::string& job,
                     const std::string& rule, core::RuleStatus status) {
  std::shared_ptr<const core::JobRecord> record = manager.GetJob(job);
  if (record == nullptr) return false;
  for (const auto& entry : record->debug_rule_evaluation_statuses()) {
    if (entry.rule_configuration_name() == rule) return entry.rule_evaluation_status() == status;
  }
  for (const auto& entry : record->profiler_rule_evaluation_statuses()) {
    if (entry.rule_configuration_name() == rule) return entry.rule_evaluation_status() == status;
  }
  return false;
}

// Queue key: job and rule, joined by a character that names cannot hold.
std::string KeyOf(const std::string& job, const std::string& rule) {
  return absl::StrCat(job, std::string(1, '\0'), rule);
}

}  // namespace

struct RuleStatusRecorder::State : std::enable_shared_from_this<State> {
  struct Entry {
    int64_t last_evaluated_step = -1;
    core::RuleStatus status;
    std::string details;
    std::optional<v1::RuleReadProgress> read;
    std::function<void()> on_durable;  // May be empty.
  };
  struct RuleQueue {
    std::string job;
    std::string rule;
    std::deque<Entry> entries;             // The first is the one being written.
    bool in_flight = false;                // Sent, its answer not in yet.
    absl::Duration backoff;                // The wait before the next retry of the first.
    int refusals = 0;                      // Of the first, in a row.
    std::optional<absl::Time> next_retry;  // Of the first, once refused.
  };

  State(core::TrainingJobManager* manager, RuleStatusRecorderOptions options)
      : manager(manager), options(std::move(options)) {}

  // Sends the first entry of the queue at `key`, unless it is in flight.
  // REQUIRES: mu not held (the manager may answer on this thread).
  void Send(const std::string& key);
  // The manager's answer to the first entry of the queue at `key`.
  void OnDone(const std::string& key, const absl::Status& result);

  core::TrainingJobManager* const manager;
  const RuleStatusRecorderOptions options;
  // Set once by the recorder's constructor; its callbacks hold a weak
  // reference to this state.
  std::unique_ptr<base::DeadlineTimer> timer;

  mutable absl::Mutex mu;
  std::map<std::string, RuleQueue> queues ABSL_GUARDED_BY(mu);
  bool shut_down ABSL_GUARDED_BY(mu) = false;
};

void RuleStatusRecorder::State::Send(const std::string& key) {
  Entry entry;
  std::string job;
  std::string rule;
  {
    absl::MutexLock lock(&mu);
    if (shut_down) return;
    auto it = queues.find(key);
    if (it == queues.end() || it->second.in_flight || it->second.entries.empty()) return;
    it->second.in_flight = true;
    it->second.next_retry.reset();
    entry = it->second.entries.front();
    job = it->second.job;
    rule = it->second.rule;
  }
  const core::WriteFence fence = core::FenceForWrite(options.leases, job);
  if (!fence.allowed) {
    // The lease is gone: this replica writes nothing more for the job.
    OnDone(key, absl::FailedPreconditionError(absl::StrCat(
                    "this replica no longer holds the evaluation lease of job '", job, "'")));
    return;
  }
  // Records of a rule are sent one at a time, so a record this one repeats
  // is committed by now.
  if (entry.on_durable && AlreadyRecorded(*manager, job, rule, entry.status)) {
    absl::MutexLock lock(&mu);
    auto it = queues.find(key);
    if (it != queues.end() && !it->second.entries.empty()) {
      it->second.entries.front().on_durable = nullptr;
    }
  }
  if (entry.last_evaluated_step >= 0 || entry.read.has_value()) {
    // Queued ahead of the status; if its write fails, so does the status's
    // (the manager fails every change queued behind a failed write), and
    // both are sent again.
    std::vector<core::RuleProgress> progress;
    progress.push_back({.rule = rule,
                        .last_evaluated_step = entry.last_evaluated_step,
                        .read = std::move(entry.read)});
    manager->RecordRuleProgress(
        job, std::move(progress), [](const absl::Status&) {}, fence.fence);
  }
  manager->SetRuleEvaluationStatus(
      job, rule, entry.status, std::move(entry.details),
      [self = shared_from_this(), key](const absl::Status& result) { self->OnDone(key, result); },
      fence.fence);
}

void RuleStatusRecorder::State::OnDone(const std::string& key, const absl::Status& result) {
  std::string next_attempt_note;
  absl::Time retry_at = absl::InfinitePast();
  std::function<void()> on_durable;  // Called outside the lock.
  absl::Cleanup call_on_durable = [&on_durable] {
    if (on_durable) on_durable();
  };
  {
    absl::MutexLock lock(&mu);
    if (shut_down) return;
    auto it = queues.find(key);
    if (it == queues.end() || it->second.entries.empty()) return;
    RuleQueue& queue = it->second;
    queue.in_flight = false;
    if (IsFinal(result)) {
      if (!result.ok() && !absl::IsFailedPrecondition(result) && !absl::IsNotFound(result)) {
        spdlog::warn("recording the status of rule '{}' of job '{}' was refused: {}", queue.rule,
                     queue.job, result.ToString());
      }
      if (queue.refusals > 0 && result.ok()) {
        spdlog::info("the status of rule '{}' of job '{}' is recorded after {} refused writes",
                     queue.rule, queue.job, queue.refusals);
      }
      if (result.ok()) on_durable = std::move(queue.entries.front().on_durable);
      queue.entries.pop_front();
      queue.refusals = 0;
      queue.backoff = options.initial_backoff;
      if (queue.entries.empty()) {
        queues.erase(it);
        return;
      }
      retry_at = options.clock->Now();  // The next record of this rule, now.
    } else {
      // Logged at the first refusal and then at every 8th, not at every retry.
      if (queue.refusals % 8 == 0) {
        spdlog::warn(
            "recording the status of rule '{}' of job '{}' failed ({}); retrying in {} until it is "
            "durable",
            queue.rule, queue.job, result.ToString(), absl::FormatDuration(queue.backoff));
      }
      ++queue.refusals;
      retry_at = options.clock->Now() + queue.backoff;
      queue.next_retry = retry_at;
      queue.backoff = std::min(queue.backoff * 2, options.max_backoff);
    }
  }
  // From the timer's thread: this may run on the manager's committer thread,
  // which must not be made to queue writes behind its own callback.
  timer->Set(key, retry_at);
}

RuleStatusRecorder::RuleStatusRecorder(core::TrainingJobManager* manager,
                                       RuleStatusRecorderOptions options)
    : state_(std::make_shared<State>(manager, std::move(options))) {
  std::weak_ptr<State> weak = state_;
  state_->timer =
      std::make_unique<base::DeadlineTimer>(state_->options.clock, [weak](const std::string& key) {
        if (std::shared_ptr<State> state = weak.lock()) state->Send(key);
      });
}

RuleStatusRecorder::~RuleStatusRecorder() { Shutdown(); }

void RuleStatusRecorder::Record(const std::string& job, const std::string& rule,
                                int64_t last_evaluated_step, core::RuleStatus status,
                                std::string details, std::optional<v1::RuleReadProgress> read,
                                std::function<void()> on_durable) {
  const std::string key = KeyOf(job, rule);
  {
    absl::MutexLock lock(&state_->mu);
    if (state_->shut_down) return;
    State::RuleQueue& queue = state_->queues[key];
    if (queue.entries.empty()) {
      queue.job = job;
      queue.rule = rule;
      queue.backoff = state_->options.initial_backoff;
    }
    queue.entries.push_back(
        {last_evaluated_step, status, std::move(details), std::move(read), std::move(on_durable)});
    // Behind another record of this rule: sent once that one is settled.
    if (queue.entries.size() > 1) return;
  }
  state_->Send(key);
}

size_t RuleStatusRecorder::pending() const {
  absl::MutexLock lock(&state_->mu);
  size_t pending = 0;
  for (const auto& [key, queue] : state_->queues) pending += queue.entries.size();
  return pending;
}

std::optional<absl::Time> RuleStatusRecorder::NextRetry(const std::string& job,
                                                        const std::string& rule) const {
  absl::MutexLock lock(&state_->mu);
  auto it = state_->queues.find(KeyOf(job, rule));
  if (it == state_->queues.end()) return std::nullopt;
  return it->second.next_retry;
}

void RuleStatusRecorder::Shutdown() {
  {
    absl::MutexLock lock(&state_->mu);
    if (state_->shut_down) return;
    state_->shut_down = true;
    state_->queues.clear();
  }
  state_->timer->Shutdown();
}

}  // namespace debugplane::rules_engine
