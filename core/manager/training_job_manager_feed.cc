// TrainingJobManager's side of replicas: following the storage's change
// feed, read-your-writes catch-ups and agent presence across servers (see
// the top of core/manager/training_job_manager.h).

#include <algorithm>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "core/manager/training_job_manager.h"
#include "spdlog/spdlog.h"

namespace debugplane::core {
namespace {

// Changes read from the feed per query.
constexpr int kFeedPage = 512;

absl::Status ShuttingDownError() {
  return absl::UnavailableError("the server is shutting down; retry on another server");
}

absl::Status FeedUnreadable(const absl::Status& cause) {
  return absl::UnavailableError(absl::StrCat(
      "this server cannot tell whether it has every change the other servers committed: the "
      "change feed cannot be read (",
      cause.message(), "); retry later"));
}

}  // namespace

absl::Status TrainingJobManager::CatchUp() {
  while (true) {
    int64_t after = 0;
    {
      absl::ReaderMutexLock lock(&mu_);
      after = applied_through_;
    }
    absl::StatusOr<std::vector<persistence::JobChange>> changes =
        storage_->ReadChangesAfter(after, kFeedPage);
    {
      absl::MutexLock lock(&mu_);
      ++feed_stats_.reads;
      feed_stats_.storage_reachable = changes.ok();
    }
    if (!changes.ok()) return changes.status();
    if (changes->empty()) return absl::OkStatus();
    WatchesToDrain to_drain;
    Observed observed;
    // Read without apply_mu_ (the committer writes meanwhile), applied
    // with it: a write of this server's that the read found was published
    // by the committer before it let go of apply_mu_, so it is skipped.
    absl::MutexLock apply(&apply_mu_);
    {
      absl::MutexLock lock(&mu_);
      ApplyChangesLocked(*changes, Now(), to_drain, observed);
    }
    watch_hub_->StartDrains(to_drain);
    CallObservers(observed);
    if (changes->size() < static_cast<size_t>(kFeedPage)) return absl::OkStatus();
  }
}

void TrainingJobManager::ApplyChangesLocked(const std::vector<persistence::JobChange>& changes,
                                            absl::Time now, WatchesToDrain& to_drain,
                                            Observed& observed) {
  mu_.AssertHeld();
  for (const persistence::JobChange& change : changes) {
    // Another catch-up (the committer's, after a conflict) may have applied
    // it already.
    if (change.sequence <= applied_through_) continue;
    ApplyChangeLocked(change, now, to_drain, observed);
  }
  applied_through_ = std::max(applied_through_, changes.back().sequence);
  feed_stats_.applied_sequence = applied_through_;
  // An older change of a deleted job can no longer come.
  for (auto it = tombstones_.begin(); it != tombstones_.end();) {
    it = it->second <= applied_through_ ? tombstones_.erase(it) : std::next(it);
  }
}

void TrainingJobManager::ApplyChangeLocked(const persistence::JobChange& change, absl::Time now,
                                           WatchesToDrain& to_drain, Observed& observed) {
  mu_.AssertHeld();
  auto it = jobs_.find(change.name);
  int64_t known = it == jobs_.end() ? 0 : it->second.sequence;
  if (auto tombstone = tombstones_.find(change.name); tombstone != tombstones_.end()) {
    known = std::max(known, tombstone->second);
  }
  // This server's own write (published by the committer already), or a
  // state older than the one it has.
  if (change.sequence <= known) {
    ++feed_stats_.skipped;
    return;
  }
  std::shared_ptr<const JobRecord> record;
  std::shared_ptr<const std::string> encoded;  // `record` serialized.
  if (!change.deleted) {
    auto parsed = std::make_shared<JobRecord>();
    if (!parsed->ParseFromString(change.row.record) || parsed->training_job_name() != change.name) {
      spdlog::error(
          "replica '{}': change {} of training job '{}' in the feed is unreadable (written by an "
          "incompatible version?); skipped",
          options_.replica_id, change.sequence, change.name);
      return;
    }
    // Written by an older replica with an agent's whole text: served cut.
    encoded = std::make_shared<const std::string>(
        BoundStoredTexts(*parsed) ? parsed->SerializeAsString() : change.row.record);
    record = std::move(parsed);
  } else if (it == jobs_.end() || it->second.committed == nullptr) {
    tombstones_[change.name] = change.sequence;  // Gone here already.
    ++feed_stats_.skipped;
    return;
  }
  ++feed_stats_.applied;
  if (it == jobs_.end()) it = jobs_.emplace(change.name, JobEntry{}).first;
  JobEntry& entry = it->second;
  entry.version = change.deleted ? persistence::kAbsent : change.version;
  entry.sequence = change.sequence;
  // Changes of this server queued on the old state will fail their version
  // check and be computed again on this one.
  if (entry.queued_changes == 0) {
    entry.latest = record;
    entry.latest_version = entry.version;
  }
  if (change.deleted) tombstones_[change.name] = change.sequence;
  observed.emplace_back(change.name, record);
  CommitStateLocked(it, std::move(record), std::move(encoded), now, /*done=*/nullptr, to_drain);
}

void TrainingJobManager::WakeFollower() {
  absl::MutexLock lock(&follow_mu_);
  follow_wake_ = true;
  follow_cv_.Signal();
}

void TrainingJobManager::AwaitCaughtUp(DoneCallback done) {
  if (!following_) {
    std::move(done)(absl::OkStatus());
    return;
  }
  {
    absl::MutexLock lock(&follow_mu_);
    if (!follow_stop_) {
      // The next read of the feed starts after this: it sees every change
      // committed before the call.
      catch_up_waiters_.push_back(std::move(done));
      follow_cv_.Signal();
      return;
    }
  }
  std::move(done)(ShuttingDownError());
}

absl::Status TrainingJobManager::CatchUpNow(absl::Duration timeout) {
  struct Outcome {
    absl::Notification done;
    absl::Status status;
  };
  auto outcome = std::make_shared<Outcome>();
  AwaitCaughtUp([outcome](absl::Status status) {
    outcome->status = std::move(status);
    outcome->done.Notify();
  });
  if (!outcome->done.WaitForNotificationWithTimeout(timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("the change feed was not read within ", absl::FormatDuration(timeout)));
  }
  return outcome->status;
}

void TrainingJobManager::FollowLoop() {
  absl::Time next_heartbeat = Now() + options_.presence_heartbeat;
  bool reported_failure = false;
  std::vector<DoneCallback> waiters;
  while (AwaitFollowWork(Now() + options_.change_poll_interval, next_heartbeat, waiters)) {
    const bool heartbeat = Now() >= next_heartbeat;
    if (heartbeat) next_heartbeat = Now() + options_.presence_heartbeat;
    WritePresence(heartbeat);
    const absl::Status caught_up = CatchUp();
    ReportFeedReachability(caught_up, reported_failure);
    const absl::Status reply = caught_up.ok() ? absl::OkStatus() : FeedUnreadable(caught_up);
    for (DoneCallback& waiter : waiters) std::move(waiter)(reply);
    waiters.clear();
  }
  std::vector<DoneCallback> left;
  {
    absl::MutexLock lock(&follow_mu_);
    left.swap(catch_up_waiters_);
  }
  for (DoneCallback& waiter : left) std::move(waiter)(ShuttingDownError());
}

bool TrainingJobManager::AwaitFollowWork(absl::Time poll_at, absl::Time next_heartbeat,
                                         std::vector<DoneCallback>& waiters) {
  absl::MutexLock lock(&follow_mu_);
  // In real time, as the clock says (a clock that moves only when told, in
  // tests, leaves the reads to the wake-ups).
  const absl::Duration wait = options_.clock->RealTimeUntil(std::min(poll_at, next_heartbeat));
  const auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(follow_mu_) {
    return follow_stop_ || follow_wake_ || !catch_up_waiters_.empty();
  };
  // Timed out: poll (the safety net) or heartbeat.
  follow_mu_.AwaitWithTimeout(absl::Condition(&woken), wait);
  if (follow_stop_) return false;  // The waiters fail in FollowLoop.
  follow_wake_ = false;
  waiters.swap(catch_up_waiters_);
  return true;
}

void TrainingJobManager::ReportFeedReachability(const absl::Status& caught_up,
                                                bool& reported_failure) {
  if (!caught_up.ok() && !reported_failure) {
    spdlog::warn("replica '{}': cannot read the change feed: {}; retrying", options_.replica_id,
                 caught_up.ToString());
  } else if (caught_up.ok() && reported_failure) {
    spdlog::info("replica '{}': reading the change feed again (up to sequence {})",
                 options_.replica_id, feed_stats().applied_sequence);
  }
  if (reported_failure != !caught_up.ok()) {
    std::function<void(bool)> observer;
    {
      absl::MutexLock lock(&follow_mu_);
      observer = reachability_observer_;
    }
    if (observer) observer(caught_up.ok());
  }
  reported_failure = !caught_up.ok();
}

void TrainingJobManager::SetFeedReachabilityObserver(std::function<void(bool)> observer) {
  absl::MutexLock lock(&follow_mu_);
  reachability_observer_ = std::move(observer);
}

TrainingJobManager::FeedStats TrainingJobManager::feed_stats() const {
  absl::ReaderMutexLock lock(&mu_);
  return feed_stats_;
}

void TrainingJobManager::WritePresence(bool heartbeat) {
  std::vector<persistence::AgentPresenceRow> rows;
  std::set<std::string> written;
  {
    absl::MutexLock lock(&mu_);
    const int64_t now_us = absl::ToUnixMicros(Now());
    auto add = [&](const std::string& name, const JobEntry* entry) {
      persistence::AgentPresenceRow& row = rows.emplace_back();
      row.job_name = name;
      row.replica_id = options_.replica_id;
      row.heartbeat_us = now_us;
      if (entry != nullptr) {
        row.agents = static_cast<int>(entry->agents.size());
        if (entry->agents_absent_since != absl::InfinitePast()) {
          row.absent_since_us = absl::ToUnixMicros(entry->agents_absent_since);
        }
      }
    };
    for (const std::string& name : presence_dirty_) {
      auto it = jobs_.find(name);
      add(name, it == jobs_.end() ? nullptr : &it->second);
    }
    written = std::move(presence_dirty_);
    presence_dirty_.clear();
    if (heartbeat) {
      for (const auto& [name, entry] : jobs_) {
        if (!entry.agents.empty() && written.count(name) == 0) add(name, &entry);
      }
    }
  }
  if (rows.empty()) return;
  absl::Status put = storage_->PutAgentPresence(rows);
  if (put.ok() || put.code() == absl::StatusCode::kUnimplemented) return;
  spdlog::debug("replica '{}': cannot record agent presence: {}", options_.replica_id,
                put.ToString());
  absl::MutexLock lock(&mu_);
  presence_dirty_.insert(written.begin(), written.end());  // Again next time.
}

AgentPresence TrainingJobManager::RemotePresence(const std::string& job_name) {
  AgentPresence remote;
  absl::StatusOr<std::vector<persistence::AgentPresenceRow>> rows =
      storage_->ReadAgentPresence(job_name);
  if (!rows.ok()) {
    if (rows.status().code() != absl::StatusCode::kUnimplemented) {
      spdlog::warn("replica '{}': cannot read the other servers' agents of training job '{}': {}",
                   options_.replica_id, job_name, rows.status().ToString());
    }
    return remote;
  }
  // A server that has not confirmed its count for three heartbeats is gone
  // (or cut off): its agents reconnect elsewhere, or are gone too.
  const int64_t fresh_after_us = absl::ToUnixMicros(Now() - 3 * options_.presence_heartbeat);
  for (const persistence::AgentPresenceRow& row : *rows) {
    if (row.replica_id == options_.replica_id) continue;
    if (row.heartbeat_us >= fresh_after_us) remote.connected += row.agents;
    if (row.absent_since_us != 0) {
      remote.absent_since =
          std::max(remote.absent_since, absl::FromUnixMicros(row.absent_since_us));
    }
  }
  return remote;
}

}  // namespace debugplane::core
