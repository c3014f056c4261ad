#include "rules_engine/actions/action_dispatcher.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/clock_wake.h"
#include "core/jobs/rule_actions.h"
#include "spdlog/spdlog.h"

namespace debugplane::rules_engine {
namespace {

using core::JobRecord;

const v1::RuleAction* FindAction(const JobRecord& job, const std::string& action_id) {
  for (const auto& action : job.rule_actions()) {
    if (action.action_id() == action_id) return &action;
  }
  return nullptr;
}

std::string RuleDetails(const JobRecord& job, const std::string& rule) {
  for (const auto& status : job.debug_rule_evaluation_statuses()) {
    if (status.rule_configuration_name() == rule) return status.status_details();
  }
  return "";
}

}  // namespace

ActionDispatcher::ActionDispatcher(core::TrainingJobManager* manager,
                                   ActionDispatcherOptions options)
    : manager_(manager),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : base::SystemClock()) {}

ActionDispatcher::~ActionDispatcher() { Shutdown(); }

void ActionDispatcher::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (started_ || stopping_) return;
    started_ = true;
  }
  // A clock moved by hand wakes the threads waiting for a retry to be due.
  jump_listener_id_ = base::WakeOnJumps(*clock_, mu_, cv_);
  for (int i = 0; i < std::max(1, options_.threads); ++i) {
    threads_.emplace_back([this] { WorkerLoop(); });
  }
  core::ListenForJobLeases(options_.leases, this);
  core::TrainingJobManager::Observation observation = manager_->AddCommitObserver(
      [this](const std::string& name, std::shared_ptr<const JobRecord> job) {
        OnCommit(name, job);
      });
  observer_id_ = observation.id;
  absl::MutexLock lock(&mu_);
  for (const auto& job : observation.jobs) TrackLocked(*job);
}

void ActionDispatcher::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    const bool was_started = started_ && !stopping_;
    stopping_ = true;
    cv_.SignalAll();
    if (!was_started) return;
  }
  manager_->RemoveCommitObserver(observer_id_);
  clock_->RemoveJumpListener(jump_listener_id_);
  for (auto& thread : threads_) thread.join();
  threads_.clear();
  // The manager calls every completion (committed or refused), and those
  // touch this object.
  absl::MutexLock lock(&mu_);
  while (records_in_flight_ > 0) cv_.Wait(&mu_);
}

size_t ActionDispatcher::pending_actions() const {
  absl::MutexLock lock(&mu_);
  return tracked_.size();
}

void ActionDispatcher::OnCommit(const std::string& job_name,
                                const std::shared_ptr<const JobRecord>& job) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  if (job == nullptr) {
    // Deleted: its undelivered actions go with it.
    for (auto it = tracked_.begin(); it != tracked_.end();) {
      if (it->second.job_name == job_name && it->second.state != Tracked::State::kRunning) {
        it = tracked_.erase(it);
      } else {
        ++it;
      }
    }
    return;
  }
  TrackLocked(*job);
}

void ActionDispatcher::OnLeaseAcquired(const std::string& job_name) {
  std::shared_ptr<const JobRecord> job = manager_->GetJob(job_name);
  absl::MutexLock lock(&mu_);
  if (stopping_ || !started_ || job == nullptr) return;
  TrackLocked(*job);
}

void ActionDispatcher::OnLeaseLost(const std::string& job_name) {
  absl::MutexLock lock(&mu_);
  for (auto it = tracked_.begin(); it != tracked_.end();) {
    if (it->second.job_name == job_name && it->second.state == Tracked::State::kQueued) {
      it = tracked_.erase(it);
    } else {
      ++it;
    }
  }
}

bool ActionDispatcher::OwnsLocked(const std::string& job_name) const {
  return options_.leases == nullptr || options_.leases->Holds(job_name);
}

ActionDispatcher::Gate ActionDispatcher::Claim(const std::string& action_id,
                                               const std::string& job_name,
                                               std::optional<persistence::ActionClaim>& claim) {
  if (options_.outbox == nullptr) return Gate::kGo;
  const std::string claimer =
      options_.leases != nullptr ? options_.leases->replica_id() : std::string("this-server");
  absl::StatusOr<persistence::ClaimResult> claimed =
      options_.outbox->Claim(action_id, job_name, claimer, options_.claim_duration);
  if (!claimed.ok()) {
    spdlog::warn("rule action {} of job '{}': cannot claim it in the outbox (trying again): {}",
                 action_id, job_name, claimed.status().ToString());
    return Gate::kLater;
  }
  switch (claimed->outcome) {
    case persistence::ClaimOutcome::kClaimed:
      claim = claimed->claim;
      return Gate::kGo;
    case persistence::ClaimOutcome::kDone:
      return Gate::kDrop;  // Its outcome is durable: the commit shows it.
    case persistence::ClaimOutcome::kClaimedByOther:
      break;
  }
  spdlog::info(
      "rule action {} of job '{}' is claimed by another replica; trying again when "
      "that claim may have expired",
      action_id, job_name);
  return Gate::kLater;
}

void ActionDispatcher::CompleteClaims() {
  std::vector<persistence::ActionClaim> claims;
  {
    absl::MutexLock lock(&mu_);
    claims.swap(to_complete_);
  }
  for (const persistence::ActionClaim& claim : claims) {
    // Its outcome is durable in the job record already; a failure here only
    // leaves a row that no replica acts on (the record says it is done).
    if (absl::Status s = options_.outbox->Complete(claim); !s.ok()) {
      spdlog::warn("rule action {}: marking its claim done: {}", claim.action_id, s.ToString());
    }
  }
}

void ActionDispatcher::TrackLocked(const JobRecord& job) {
  if (!OwnsLocked(job.training_job_name())) return;  // Another replica's.
  bool queued = false;
  for (const auto& action : job.rule_actions()) {
    auto it = tracked_.find(action.action_id());
    if (action.status() != v1::RuleActionStatus::Pending) {
      // Its outcome is durable: forget it (a running one is dropped by its
      // thread when it finishes).
      if (it != tracked_.end() && it->second.state != Tracked::State::kRunning) tracked_.erase(it);
      continue;
    }
    if (it != tracked_.end()) continue;  // Queued, running, or being recorded.
    Tracked tracked;
    tracked.job_name = job.training_job_name();
    tracked.attempts = action.attempts();
    // A restart picks up where the retries were, without waiting out the
    // old backoff again: the previous process's timer is gone.
    tracked.due = clock_->Now();
    tracked_.emplace(action.action_id(), std::move(tracked));
    queued = true;
  }
  if (queued) cv_.SignalAll();
}

absl::Duration ActionDispatcher::Backoff(int attempts) const {
  absl::Duration backoff = options_.initial_backoff;
  for (int i = 1; i < attempts && backoff < options_.max_backoff; ++i) backoff *= 2;
  return std::min(backoff, options_.max_backoff);
}

void ActionDispatcher::WorkerLoop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    if (!to_complete_.empty()) {
      mu_.Unlock();
      CompleteClaims();
      mu_.Lock();
    }
    auto next = NextQueuedLocked();
    if (stopping_) return;
    const absl::Time now = clock_->Now();
    if (next == tracked_.end()) {
      cv_.Wait(&mu_);
      continue;
    }
    if (next->second.due > now) {
      // A FakeClock's jump signals cv_.
      cv_.WaitWithTimeout(&mu_, clock_->RealTimeUntil(next->second.due));
      continue;
    }
    if (!OwnsLocked(next->second.job_name)) {  // The lease went meanwhile.
      tracked_.erase(next);
      continue;
    }
    const std::string action_id = next->first;
    Tracked& tracked = next->second;
    tracked.state = Tracked::State::kRunning;
    Attempt attempt{.action_id = action_id,
                    .job_name = tracked.job_name,
                    .accepted_by = tracked.accepted_by,
                    .number = tracked.attempts + 1};
    mu_.Unlock();
    CarryOut(attempt);
    mu_.Lock();
    std::optional<RecordRequest> record = SettleLocked(attempt);
    if (!record.has_value()) continue;
    ++records_in_flight_;
    mu_.Unlock();
    Record(*std::move(record));
    mu_.Lock();
  }
}

std::map<std::string, ActionDispatcher::Tracked>::iterator ActionDispatcher::NextQueuedLocked() {
  auto next = tracked_.end();
  for (auto it = tracked_.begin(); it != tracked_.end(); ++it) {
    if (it->second.state != Tracked::State::kQueued) continue;
    if (next == tracked_.end() || it->second.due < next->second.due) next = it;
  }
  return next;
}

void ActionDispatcher::CarryOut(Attempt& attempt) {
  attempt.job = manager_->GetJob(attempt.job_name);
  attempt.action = attempt.job == nullptr ? nullptr : FindAction(*attempt.job, attempt.action_id);
  const bool still_pending =
      attempt.action != nullptr && attempt.action->status() == v1::RuleActionStatus::Pending;
  attempt.gate =
      still_pending ? Claim(attempt.action_id, attempt.job_name, attempt.claim) : Gate::kDrop;
  // Checked after the claim: carried out only while the lease is ours.
  const core::WriteFence fence = core::FenceForWrite(options_.leases, attempt.job_name);
  if (attempt.gate == Gate::kGo && !fence.allowed) attempt.gate = Gate::kDrop;
  if (attempt.gate == Gate::kGo) {
    attempt.outcome = Execute(*attempt.job, *attempt.action, attempt.accepted_by, fence.fence);
  }
}

std::optional<ActionDispatcher::RecordRequest> ActionDispatcher::SettleLocked(
    const Attempt& attempt) {
  auto it = tracked_.find(attempt.action_id);
  if (it == tracked_.end()) return std::nullopt;
  if (attempt.gate == Gate::kDrop) {
    tracked_.erase(it);
    return std::nullopt;
  }
  if (attempt.gate == Gate::kLater) {
    it->second.state = Tracked::State::kQueued;
    it->second.due = clock_->Now() + std::clamp(options_.claim_duration / 8,
                                                absl::Milliseconds(100), absl::Seconds(15));
    return std::nullopt;
  }
  it->second.claim = attempt.claim;
  it->second.accepted_by = attempt.accepted_by;
  const Outcome& outcome = attempt.outcome;
  const int attempts = attempt.number;
  RecordRequest record{.action_id = attempt.action_id,
                       .job_name = attempt.job_name,
                       .status = outcome.status,
                       .details = outcome.details,
                       .attempts = attempts,
                       .claim = attempt.claim};
  if (outcome.retry && attempts >= options_.max_attempts) {
    record.status = v1::RuleActionStatus::Failed;
    record.details = absl::StrCat("gave up after ", attempts, " attempts; last: ", outcome.details);
  } else if (outcome.retry) {
    const absl::Duration backoff = Backoff(attempts);
    record.details = absl::StrCat("attempt ", attempts, " failed: ", outcome.details,
                                  "; next attempt in ", absl::FormatDuration(backoff));
    it->second.due = clock_->Now() + backoff;
  }
  const bool final_status = record.status != v1::RuleActionStatus::Pending;
  if (options_.metrics != nullptr) {
    options_.metrics->CountOutcome(
        attempt.action->action(),
        final_status ? core::RuleActionStatusName(record.status) : "Retried");
  }
  it->second.attempts = attempts;
  it->second.state = final_status ? Tracked::State::kRecorded : Tracked::State::kQueued;
  if (final_status) {
    spdlog::info("rule action {} ({} {}) of job '{}': {} - {}", attempt.action_id,
                 attempt.action->action(), attempt.action->target(), attempt.job_name,
                 std::string(core::RuleActionStatusName(record.status)), record.details);
  }
  return record;
}

void ActionDispatcher::Record(RecordRequest record) {
  const bool final_status = record.status != v1::RuleActionStatus::Pending;
  manager_->SetRuleActionStatus(record.job_name, record.action_id, record.status, record.details,
                                record.attempts,
                                [this, action_id = record.action_id, job_name = record.job_name,
                                 final_status, claim = record.claim](const absl::Status& recorded) {
                                  OnRecorded(action_id, job_name, final_status, claim, recorded);
                                });
}

void ActionDispatcher::OnRecorded(const std::string& action_id, const std::string& job_name,
                                  bool final_status,
                                  const std::optional<persistence::ActionClaim>& claim,
                                  const absl::Status& recorded) {
  absl::MutexLock lock(&mu_);
  --records_in_flight_;
  cv_.SignalAll();
  if (recorded.ok()) {
    // The commit observer forgets it; the outbox hears it is done.
    if (final_status && claim.has_value()) to_complete_.push_back(*claim);
    return;
  }
  if (recorded.code() == absl::StatusCode::kFailedPrecondition ||
      recorded.code() == absl::StatusCode::kNotFound) {
    // Settled otherwise, or the job is gone: nothing to wait for.
    auto it = tracked_.find(action_id);
    if (it != tracked_.end() && it->second.state == Tracked::State::kRecorded) {
      tracked_.erase(it);
    }
    return;
  }
  // Not durable (storage failed or shutting down): the action is still
  // Pending on disk; try again later rather than forget it.
  spdlog::warn("recording rule action {} of job '{}' failed: {}", action_id, job_name,
               recorded.ToString());
  auto it = tracked_.find(action_id);
  if (it == tracked_.end() || it->second.state != Tracked::State::kRecorded) return;
  it->second.state = Tracked::State::kQueued;
  it->second.due = clock_->Now() + Backoff(it->second.attempts);
  cv_.SignalAll();
}

ActionDispatcher::Outcome ActionDispatcher::Execute(
    const JobRecord& job, const v1::RuleAction& action, std::set<std::string>& accepted_by,
    const std::optional<persistence::CheckLease>& fence) {
  if (action.action() == core::RuleActionTypeName(core::RuleActionType::kStopTraining)) {
    return StopTraining(job, action, fence);
  }
  return Notify(job, action, accepted_by);
}

ActionDispatcher::Outcome ActionDispatcher::StopTraining(
    const JobRecord& job, const v1::RuleAction& action,
    const std::optional<persistence::CheckLease>& fence) {
  const std::string& prefix = action.target();
  std::vector<std::string> matches = manager_->ActiveJobNamesWithPrefix(prefix);
  std::string target;
  if (prefix == job.training_job_name() &&
      std::find(matches.begin(), matches.end(), prefix) != matches.end()) {
    // No prefix given (or the rule's own job name): the rule's own job, even
    // if other names start with it.
    target = prefix;
  } else if (matches.size() == 1) {
    target = matches.front();
  } else if (matches.empty()) {
    return {v1::RuleActionStatus::Skipped,
            absl::StrCat("no InProgress training job name starts with '", prefix,
                         "'; nothing to stop")};
  } else {
    const size_t shown = std::min<size_t>(matches.size(), 5);
    return {v1::RuleActionStatus::Skipped,
            absl::StrCat(matches.size(), " InProgress training jobs start with '", prefix, "' (",
                         absl::StrJoin(matches.begin(), matches.begin() + shown, ", "),
                         matches.size() > shown ? ", ..." : "",
                         "); stopping none: give training_job_prefix that matches one job")};
  }
  const std::string reason =
      absl::StrCat("Stopped by rule ", action.rule_configuration_name(), " of training job ",
                   job.training_job_name(),
                   " (StopTraining action): ", RuleDetails(job, action.rule_configuration_name()));
  absl::Notification stopped;
  absl::Status result;
  manager_->StopTrainingJobWithReason(
      target, reason.substr(0, 1024),
      [&stopped, &result](const absl::Status& status) {
        result = status;
        stopped.Notify();
      },
      fence);
  stopped.WaitForNotification();
  if (result.ok()) {
    return {v1::RuleActionStatus::Succeeded, absl::StrCat("stopped training job '", target, "'")};
  }
  if (result.code() == absl::StatusCode::kNotFound) {
    return {v1::RuleActionStatus::Skipped,
            absl::StrCat("training job '", target, "' was deleted before it could be stopped")};
  }
  return {v1::RuleActionStatus::Pending,
          absl::StrCat("stopping training job '", target, "' failed: ", result.message()), true};
}

ActionDispatcher::Outcome ActionDispatcher::Notify(const JobRecord& job,
                                                   const v1::RuleAction& action,
                                                   std::set<std::string>& accepted_by) {
  const core::RuleActionType channel =
      action.action() == core::RuleActionTypeName(core::RuleActionType::kSms)
          ? core::RuleActionType::kSms
          : core::RuleActionType::kEmail;
  // Each sink with its key in `accepted_by`: its place in the options, as
  // two sinks may describe themselves alike (webhooks on one host differ
  // only in their paths, which Describe leaves out).
  std::vector<std::pair<std::string, NotificationSink*>> sinks;
  for (size_t i = 0; i < options_.sinks.size(); ++i) {
    NotificationSink* sink = options_.sinks[i].get();
    if (sink->Handles(channel)) sinks.emplace_back(absl::StrCat("sink ", i), sink);
  }
  if (sinks.empty()) {
    return {v1::RuleActionStatus::Skipped,
            absl::StrCat("no notification sink handles ", action.action(),
                         " on this server; start it with --notify-webhook URL",
                         channel == core::RuleActionType::kEmail ? " or --smtp-url URL" : "")};
  }
  Notification notification;
  notification.action_id = action.action_id();
  notification.channel = channel;
  notification.endpoint = action.target();
  notification.training_job_name = job.training_job_name();
  notification.training_job_arn = job.training_job_arn();
  notification.rule_configuration_name = action.rule_configuration_name();
  for (const auto& status : job.debug_rule_evaluation_statuses()) {
    if (status.rule_configuration_name() != action.rule_configuration_name()) continue;
    notification.rule_evaluation_status =
        std::string(core::RuleStatusName(status.rule_evaluation_status()));
    notification.status_details = status.status_details();
  }
  notification.time = core::ToAbslTime(action.creation_time());

  std::vector<std::string> failures;
  bool permanent = false;
  for (const auto& [key, sink] : sinks) {
    if (accepted_by.count(key) > 0) continue;
    absl::Status delivered = sink->Deliver(notification);
    if (delivered.ok()) {
      accepted_by.insert(key);
      continue;
    }
    permanent = permanent || delivered.code() == absl::StatusCode::kFailedPrecondition;
    failures.push_back(std::string(delivered.message()));
  }
  if (failures.empty()) {
    std::vector<std::string> names;
    for (const auto& [key, sink] : sinks) names.push_back(sink->Describe());
    return {v1::RuleActionStatus::Succeeded,
            absl::StrCat("delivered to ", absl::StrJoin(names, " and "))};
  }
  if (permanent) return {v1::RuleActionStatus::Failed, absl::StrJoin(failures, "; ")};
  return {v1::RuleActionStatus::Pending, absl::StrJoin(failures, "; "), true};
}

}  // namespace debugplane::rules_engine
