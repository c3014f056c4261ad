// TrainingJobManager's state and how it changes: start-up, the queue of
// computed changes and what their commits do to the jobs (the CommitTarget
// of the group committer), deadlines, watch registration, observers. The
// API calls are in training_job_manager_calls.cc, the replicas' side in
// training_job_manager_feed.cc.

#include "core/manager/training_job_manager.h"

#include <algorithm>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace debugplane::core {
namespace {

// How long registering a watch waits for the feed to be read (replicas).
constexpr absl::Duration kWatchCatchUpLimit = absl::Seconds(2);

absl::Status ShuttingDown() {
  return absl::UnavailableError("the server is shutting down; retry on another server");
}

}  // namespace

// The manager as the group committer's CommitTarget: forwards to it.
class TrainingJobManager::CommitOutcomes final : public CommitTarget {
 public:
  explicit CommitOutcomes(TrainingJobManager& manager) : manager_(manager) {}
  void PublishWritten(std::vector<PendingCommit>& group, absl::Time now) override {
    manager_.PublishWritten(group, now);
  }
  void RollBackFailed(std::vector<PendingCommit>& group, const absl::Status& written,
                      bool conflict) override {
    manager_.RollBackFailed(group, written, conflict);
  }
  bool TakeOutFenced(const std::string& stale_job, std::vector<PendingCommit>& group,
                     std::vector<PendingCommit>& taken) override {
    return manager_.TakeOutFenced(stale_job, group, taken);
  }
  void RetryAfterConflict(std::vector<PendingCommit> group, const absl::Status& conflict) override {
    manager_.RetryAfterConflict(std::move(group), conflict);
  }

 private:
  TrainingJobManager& manager_;
};

absl::StatusOr<std::unique_ptr<TrainingJobManager>> TrainingJobManager::Create(
    std::unique_ptr<persistence::Storage> storage, TrainingJobManagerOptions options) {
  std::unique_ptr<TrainingJobManager> manager(
      new TrainingJobManager(std::move(storage), std::move(options)));
  if (absl::Status loaded = manager->Load(); !loaded.ok()) return loaded;
  if (manager->following_) {
    // Changes committed while the jobs were read (and older states of
    // them: the table was read page by page) are applied before anything
    // is served; nobody watches yet.
    if (absl::Status caught_up = manager->CatchUp(); !caught_up.ok()) return caught_up;
  }
  manager->StartThreads();
  manager->ReleaseHostsOfPreviousRun();
  // Resume what a previous run left unfinished: stops wait again for their
  // agents, runtimes are bounded again, from the durable records.
  absl::MutexLock lock(&manager->mu_);
  for (const auto& [name, entry] : manager->jobs_) manager->ArmDeadlineLocked(name, entry);
  return manager;
}

TrainingJobManager::TrainingJobManager(std::unique_ptr<persistence::Storage> storage,
                                       TrainingJobManagerOptions options)
    : options_(std::move(options)),
      storage_(std::move(storage)),
      started_at_(options_.clock->Now()),
      watch_hub_(std::make_unique<WatchHub>(
          options_.watch_delivery_threads, options_.clock,
          [this](const std::shared_ptr<JobWatch>& watch) { Unwatch(watch); })) {}

TrainingJobManager::~TrainingJobManager() {
  Shutdown();
  // Registrations destroyed from now on leave the manager alone.
  watch_hub_.reset();
}

void TrainingJobManager::StartThreads() {
  // The committer first: a deadline or a validated call queues on it.
  commit_outcomes_ = std::make_unique<CommitOutcomes>(*this);
  committer_ = std::make_unique<GroupCommitter>(
      *storage_, apply_mu_, *commit_outcomes_,
      GroupCommitterOptions{.max_commit_group = options_.max_commit_group,
                            .max_group_wait = options_.max_group_wait,
                            .retry_conflicts = following_,
                            .clock = options_.clock});
  committer_->Start();
  deadlines_ = std::make_unique<base::DeadlineTimer>(
      options_.clock, [this](const std::string& job_name) { OnDeadline(job_name); });
  validation_pool_ = std::make_unique<base::ThreadPool>(options_.validation_threads, "dp-validate");
  if (!following_) return;
  follower_ = std::thread([this] { FollowLoop(); });
  subscription_ = storage_->SubscribeToChanges([this] { WakeFollower(); });
  spdlog::info("replica '{}': following the change feed from sequence {} ({})",
               options_.replica_id, feed_stats().applied_sequence,
               subscription_ != nullptr
                   ? "woken by LISTEN/NOTIFY"
                   : absl::StrCat("polled every ",
                                  absl::FormatDuration(options_.change_poll_interval)));
}

absl::Status TrainingJobManager::Load() {
  absl::MutexLock lock(&mu_);
  if (options_.follow_changes) {
    // Read before the jobs: a change committed meanwhile is read again
    // from the feed (and skipped or applied) rather than missed.
    absl::StatusOr<int64_t> latest = storage_->LatestChangeSequence();
    if (latest.ok()) {
      following_ = true;
      applied_through_ = *latest;
      feed_stats_.applied_sequence = *latest;
    } else if (latest.status().code() == absl::StatusCode::kUnimplemented) {
      spdlog::warn("the storage has no change feed: not following other servers' changes");
    } else {
      return latest.status();
    }
  }
  return storage_->ForEachJob([this](const persistence::JobRow& row) -> absl::Status {
    mu_.AssertHeld();
    auto record = std::make_shared<JobRecord>();
    if (!record->ParseFromString(row.record) || record->training_job_name() != row.name) {
      return absl::DataLossError(absl::StrCat(
          "stored record of training job '", row.name,
          "' is unreadable (corrupt or written by an incompatible version); refusing to start "
          "rather than lose it"));
    }
    JobEntry& entry = jobs_[row.name];
    entry.committed = record;
    // Stored by an older version with an agent's whole text: served cut (the
    // next write of the job stores it cut).
    entry.committed_encoded = BoundStoredTexts(*record)
                                  ? std::make_shared<const std::string>(record->SerializeAsString())
                                  : std::make_shared<const std::string>(row.record);
    entry.latest = record;
    entry.version = row.version;
    entry.latest_version = row.version;
    IndexLocked(row.name, nullptr, record.get());
    return absl::OkStatus();
  });
}

void TrainingJobManager::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) {
      // Another caller is shutting down or has: wait for it.
      mu_.Await(absl::Condition(&shut_down_));
      return;
    }
    shutting_down_ = true;
  }
  // No more feed reads: the subscription first (it wakes the follower).
  subscription_.reset();
  if (follower_.joinable()) {
    {
      absl::MutexLock lock(&follow_mu_);
      follow_stop_ = true;
      follow_cv_.SignalAll();
    }
    follower_.join();
  }
  // Requests waiting for validation are refused by Mutate now.
  if (validation_pool_ != nullptr) validation_pool_->Shutdown();
  // Its callback may be waiting for mu_: not under it. Deadlines are
  // recomputed from the records at the next start.
  if (deadlines_ != nullptr) deadlines_->Shutdown();
  // Commits what is queued; nothing is queued after shutting_down_.
  if (committer_ != nullptr) committer_->Stop();
  WatchesToDrain to_drain;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [name, entry] : jobs_) {
      WatchHub::EndAll(entry.watches, absl::UnavailableError("the server is shutting down"),
                       to_drain);
    }
  }
  watch_hub_->StartDrains(to_drain);
  watch_hub_->Shutdown();  // Every delivery (and `done`) queued runs first.
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
}

// --- Changes and their commits ------------------------------------------------

absl::StatusOr<PendingCommit> TrainingJobManager::ComputeLocked(
    const std::string& job_name, std::shared_ptr<const Mutation> mutation, int attempts) {
  mu_.AssertHeld();
  auto it = jobs_.find(job_name);
  const JobRecord* latest = it == jobs_.end() ? nullptr : it->second.latest.get();
  absl::StatusOr<Change> change = (*mutation)(latest);
  if (!change.ok()) return change.status();
  PendingCommit commit;
  commit.job_name = job_name;
  commit.changed = change->changed;
  commit.next = std::move(change->next);
  if (commit.changed && commit.next != nullptr) commit.encoded = std::move(change->encoded);
  commit.mutation = std::move(mutation);
  commit.attempts = attempts;
  if (commit.changed) {
    JobEntry& entry = jobs_[job_name];
    commit.expected_version = entry.latest_version;
    entry.latest = commit.next;
    entry.latest_version = commit.next == nullptr ? persistence::kAbsent : entry.latest_version + 1;
    ++entry.queued_changes;
  }
  return commit;
}

void TrainingJobManager::Mutate(const std::string& job_name, const Mutation& mutation,
                                DoneCallback done, std::optional<persistence::CheckLease> fence) {
  absl::Status refused = TryMutate(job_name, mutation, done, fence);
  if (refused.ok()) return;
  if (!absl::IsNotFound(refused) || !following_) {
    std::move(done)(std::move(refused));
    return;
  }
  // Replicas: a job created through another replica a moment ago (an agent
  // reporting on it through this one) is known here once the change feed is
  // read; only then is it truly not found.
  AwaitCaughtUp([this, job_name, mutation, done = std::move(done),
                 fence = std::move(fence)](absl::Status caught_up) mutable {
    if (caught_up.ok()) caught_up = TryMutate(job_name, mutation, done, fence);
    if (!caught_up.ok()) std::move(done)(std::move(caught_up));
  });
}

absl::Status TrainingJobManager::TryMutate(const std::string& job_name, const Mutation& mutation,
                                           DoneCallback& done,
                                           const std::optional<persistence::CheckLease>& fence) {
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return ShuttingDown();
  absl::StatusOr<PendingCommit> commit =
      ComputeLocked(job_name, std::make_shared<const Mutation>(mutation), /*attempts=*/1);
  if (!commit.ok()) return commit.status();
  commit->done = std::move(done);
  commit->fence = fence;
  // Under mu_: queued in the order the changes were computed.
  committer_->Enqueue(*std::move(commit));
  return absl::OkStatus();
}

void TrainingJobManager::PublishWritten(std::vector<PendingCommit>& group, absl::Time now) {
  Observed observed;
  WatchesToDrain to_drain;
  {
    absl::MutexLock lock(&mu_);
    for (PendingCommit& commit : group) {
      if (!commit.changed) continue;
      observed.emplace_back(commit.job_name, commit.next);
      PublishLocked(commit, now, to_drain);
    }
  }
  CallObservers(observed);
  // Watchers are told on the delivery pool; the next group need not wait.
  watch_hub_->StartDrains(to_drain);
}

void TrainingJobManager::RollBackFailed(std::vector<PendingCommit>& group,
                                        const absl::Status& written, bool conflict) {
  absl::MutexLock lock(&mu_);
  if (conflict) {
    ++feed_stats_.conflicts;
    spdlog::info("replica '{}': {}; reading the other servers' changes and trying again",
                 options_.replica_id, std::string(written.message()));
  }
  // Everything queued behind the failed group may build on it: fail it (or
  // compute it again) too, and roll every job back to its committed state.
  committer_->TakeQueued(group);
  for (const PendingCommit& commit : group) {
    if (commit.changed) RollBackLocked(commit.job_name);
  }
}

bool TrainingJobManager::TakeOutFenced(const std::string& stale_job,
                                       std::vector<PendingCommit>& group,
                                       std::vector<PendingCommit>& taken) {
  absl::MutexLock lock(&mu_);
  const auto fenced = [&](const PendingCommit& commit) {
    return commit.fence.has_value() && commit.fence->job_name == stale_job;
  };
  // The jobs the refused changes touch: every change of theirs queued after
  // may build on them, so it goes too, and the jobs roll back.
  std::set<std::string> touched;
  for (const PendingCommit& commit : group) {
    if (fenced(commit)) touched.insert(commit.job_name);
  }
  const auto goes = [&](const PendingCommit& commit) {
    return fenced(commit) || touched.count(commit.job_name) > 0;
  };
  const size_t before = taken.size();
  MoveOutIf(group, goes, taken);
  committer_->TakeQueuedIf(goes, taken);
  for (const std::string& job : touched) RollBackLocked(job);
  return taken.size() > before;
}

void TrainingJobManager::RetryAfterConflict(std::vector<PendingCommit> commits,
                                            const absl::Status& conflict) {
  // The write lost to another server's: its change is in the feed.
  if (absl::Status caught_up = CatchUp(); !caught_up.ok()) {
    spdlog::warn("replica '{}': cannot read the change feed after a conflict: {}",
                 options_.replica_id, caught_up.ToString());
  }
  std::vector<std::pair<DoneCallback, absl::Status>> failed;
  {
    absl::MutexLock lock(&mu_);
    std::vector<PendingCommit> again;
    for (PendingCommit& commit : commits) {
      std::optional<absl::Status> refusal = RetryRefusalLocked(commit, conflict);
      absl::StatusOr<PendingCommit> redone =
          refusal.has_value() ? absl::StatusOr<PendingCommit>(*std::move(refusal))
                              : ComputeLocked(commit.job_name, commit.mutation, commit.attempts + 1);
      if (!redone.ok()) {
        failed.emplace_back(std::move(commit.done), redone.status());
        continue;
      }
      redone->done = std::move(commit.done);
      redone->fence = std::move(commit.fence);  // Still written only under its lease.
      again.push_back(*std::move(redone));
    }
    // Before what was queued meanwhile (computed on the states before the
    // retries, it will conflict and be run again itself if it must).
    committer_->EnqueueFirst(std::move(again));
  }
  for (auto& [done, status] : failed) {
    if (done != nullptr) std::move(done)(status);
  }
}

std::optional<absl::Status> TrainingJobManager::RetryRefusalLocked(const PendingCommit& commit,
                                                                   const absl::Status& conflict) {
  mu_.AssertHeld();
  if (shutting_down_) return ShuttingDown();
  if (commit.mutation == nullptr || commit.attempts > options_.max_conflict_retries) {
    return absl::AbortedError(absl::StrCat(
        "training job '", commit.job_name, "' kept being changed by other servers: ",
        commit.attempts, " attempts to apply the change failed on a newer version (",
        conflict.message(), "); retry the call"));
  }
  return std::nullopt;
}

void TrainingJobManager::PublishLocked(PendingCommit& commit, absl::Time now,
                                       WatchesToDrain& to_drain) {
  mu_.AssertHeld();
  if (!commit.changed) return;
  auto it = jobs_.find(commit.job_name);
  if (it == jobs_.end()) return;  // Cannot happen: the entry has a queued change.
  JobEntry& entry = it->second;
  --entry.queued_changes;
  entry.version = commit.written_version;
  if (entry.queued_changes == 0) entry.latest_version = commit.written_version;
  entry.sequence = std::max(entry.sequence, commit.written_sequence);
  if (commit.next == nullptr && following_ && commit.written_sequence > applied_through_) {
    tombstones_[commit.job_name] = commit.written_sequence;
  }
  commit.done = CommitStateLocked(it, commit.next, commit.encoded, now, std::move(commit.done),
                                  to_drain);
}

DoneCallback TrainingJobManager::CommitStateLocked(JobMap::iterator it,
                                                   std::shared_ptr<const JobRecord> record,
                                                   std::shared_ptr<const std::string> encoded,
                                                   absl::Time now, DoneCallback done,
                                                   WatchesToDrain& to_drain) {
  mu_.AssertHeld();
  const std::string& job_name = it->first;
  JobEntry& entry = it->second;
  std::shared_ptr<const JobRecord> before = std::move(entry.committed);
  entry.committed = std::move(record);
  entry.committed_encoded = std::move(encoded);
  IndexLocked(job_name, before.get(), entry.committed.get());
  ArmDeadlineLocked(job_name, entry);
  if (entry.committed == nullptr) entry.agents.clear();  // Their streams end below.
  done = WatchHub::QueueNews(job_name, entry.watches, before, entry.committed, now,
                             std::move(done), to_drain);
  if (entry.committed == nullptr && entry.latest == nullptr && entry.queued_changes == 0 &&
      entry.watches.empty()) {
    jobs_.erase(it);
  }
  return done;
}

void TrainingJobManager::CallObservers(const Observed& observed) {
  if (observed.empty()) return;
  absl::ReaderMutexLock lock(&observers_mu_);
  for (const auto& [name, job] : observed) {
    for (const auto& [id, observer] : observers_) observer(name, job);
  }
}

void TrainingJobManager::RollBackLocked(const std::string& job_name) {
  mu_.AssertHeld();
  auto it = jobs_.find(job_name);
  if (it == jobs_.end()) return;
  JobEntry& entry = it->second;
  entry.latest = entry.committed;
  entry.latest_version = entry.version;
  entry.queued_changes = 0;
  if (entry.committed == nullptr && entry.watches.empty()) jobs_.erase(it);
}

void TrainingJobManager::IndexLocked(const std::string& name, const JobRecord* before,
                                     const JobRecord* after) {
  mu_.AssertHeld();
  if (before != nullptr) {
    by_creation_.erase({ToUnixMicros(before->creation_time()), name});
    --committed_count_;
  }
  if (after != nullptr) {
    by_creation_.insert({ToUnixMicros(after->creation_time()), name});
    ++committed_count_;
  }
}

// --- Deadlines ----------------------------------------------------------------

AgentPresence TrainingJobManager::PresenceLocked(const JobEntry& entry) const {
  mu_.AssertHeld();
  return AgentPresence{.connected = static_cast<int>(entry.agents.size()),
                       .absent_since = std::max(entry.agents_absent_since, started_at_)};
}

void TrainingJobManager::ArmDeadlineLocked(const std::string& job_name, const JobEntry& entry) {
  mu_.AssertHeld();
  if (deadlines_ == nullptr) return;  // Still loading: Create arms them all.
  const JobRecord* job = entry.committed.get();
  std::optional<absl::Time> deadline;
  if (job != nullptr && job->training_job_status() == v1::TrainingJobStatus::Stopping) {
    deadline = PlanStopCompletion(*job, PresenceLocked(entry), options_.stop_wait).at;
  } else if (job != nullptr) {
    deadline = EarliestDeadline(MaxRuntimeDeadline(*job), HostWaitDeadline(*job, options_.host_wait));
  }
  if (deadline.has_value()) {
    deadlines_->Set(job_name, *deadline);
  } else {
    deadlines_->Cancel(job_name);
  }
}

void TrainingJobManager::OnDeadline(const std::string& job_name) {
  // Replicas: the job's agents may be connected to other servers (read
  // here, on the deadline thread, not under the lock).
  const AgentPresence remote = following_ ? RemotePresence(job_name) : AgentPresence{};
  Mutate(
      job_name,
      [this, job_name, remote](const JobRecord* latest) -> absl::StatusOr<Change> {
        mu_.AssertHeld();  // Mutations run under mu_.
        // The deadline was computed from the committed record; the latest
        // one decides (a change may be queued, an agent may have come).
        AgentPresence presence;
        if (latest != nullptr) {
          presence = PresenceLocked(jobs_.at(job_name));
          presence.connected += remote.connected;
          presence.absent_since = std::max(presence.absent_since, remote.absent_since);
        }
        DeadlineOutcome outcome = ApplyDeadline(latest, presence, options_.stop_wait, options_.host_wait, Now());
        // Not due yet: wait again (the commit of a change re-arms it too).
        if (outcome.next_deadline.has_value()) deadlines_->Set(job_name, *outcome.next_deadline);
        return std::move(outcome.mutation);
      },
      [this, job_name](const absl::Status& status) {
        if (status.ok()) return;
        // Storage failed and the job kept its state: try again shortly.
        // Nothing is lost on a crash either: deadlines are recomputed from
        // the records at start-up.
        spdlog::warn("a deadline of training job '{}' could not be applied: {}; retrying", job_name,
                     status.ToString());
        deadlines_->Set(job_name, Now() + absl::Seconds(1));
      });
}

std::optional<absl::Time> TrainingJobManager::PendingDeadline(const std::string& job_name) const {
  return deadlines_->DeadlineOf(job_name);
}

// --- Watches --------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<WatchRegistration>> TrainingJobManager::RegisterWatch(
    const std::string& job_name, JobWatcher* watcher, const std::optional<HostAgent>& agent) {
  if (absl::Status valid = ValidateTrainingJobName(job_name); !valid.ok()) return valid;
  if (following_) {
    // Read-your-writes for the initial state (a job just created through
    // another server). Synchronous, bounded: this call returns the
    // registration. If the feed cannot be read now, the state here is
    // served and the feed brings the rest later.
    if (absl::Status caught_up = CatchUpNow(kWatchCatchUpLimit); !caught_up.ok()) {
      spdlog::debug("watch of training job '{}' without catching up: {}", job_name,
                    caught_up.ToString());
    }
  }
  absl::StatusOr<std::shared_ptr<JobWatch>> watch;
  {
    absl::MutexLock lock(&mu_);
    // The host's name is taken (or refused) in the order of the calls.
    absl::Status connected =
        agent.has_value() ? ConnectHostLocked(job_name, *agent) : absl::OkStatus();
    if (!connected.ok()) return connected;
    watch = AddWatchLocked(job_name, watcher, agent.has_value());
    if (watch.ok() && agent.has_value()) {
      jobs_.at(job_name).agent_hosts.emplace(watch->get(), *agent);
    }
  }
  if (!watch.ok()) return watch.status();
  if (agent.has_value() && following_) WakeFollower();
  watch_hub_->DeliverInitialState(*watch);
  return watch_hub_->MakeRegistration(*std::move(watch));
}

absl::StatusOr<std::shared_ptr<JobWatch>> TrainingJobManager::AddWatchLocked(
    const std::string& job_name, JobWatcher* watcher, bool agent) {
  mu_.AssertHeld();
  if (shutting_down_) return absl::UnavailableError("the server is shutting down");
  auto it = jobs_.find(job_name);
  if (it == jobs_.end() || it->second.committed == nullptr) return JobNotFoundError(job_name);
  JobEntry& entry = it->second;
  const bool settled = IsSettled(*entry.committed);
  // Made under mu_, so every later commit queues behind its initial state;
  // this thread is its drainer (DeliverInitialState).
  std::shared_ptr<JobWatch> watch =
      WatchHub::NewWatch(watcher, job_name, entry.committed, settled);
  if (!settled) {
    entry.watches.push_back(watch);
    if (agent) {
      entry.agents.push_back(watch.get());
      ArmDeadlineLocked(job_name, entry);  // A stop now waits for this agent.
      presence_dirty_.insert(job_name);    // For the other servers.
    }
  }
  return watch;
}

absl::Status TrainingJobManager::ConnectHostLocked(const std::string& job_name,
                                                   const HostAgent& agent) {
  mu_.AssertHeld();
  if (shutting_down_) return ShuttingDown();
  auto it = jobs_.find(job_name);
  if (it == jobs_.end() || it->second.latest == nullptr) return JobNotFoundError(job_name);
  if (IsSettled(*it->second.latest)) return absl::OkStatus();  // Nothing runs any more.
  const std::string name = job_name;
  absl::StatusOr<PendingCommit> commit = ComputeLocked(
      job_name,
      std::make_shared<const Mutation>([this, name, agent](const JobRecord* latest) {
        return ConnectHost(latest, name, agent, Now());
      }),
      /*attempts=*/1);
  if (!commit.ok()) return commit.status();
  commit->done = [name, host = HostNameOf(agent)](const absl::Status& status) {
    if (!status.ok()) {
      spdlog::warn("the connection of host '{}' of training job '{}' was not recorded: {}", host,
                   name, status.ToString());
    }
  };
  committer_->Enqueue(*std::move(commit));
  return absl::OkStatus();
}

void TrainingJobManager::DisconnectHostOf(const std::string& job_name, HostAgent agent) {
  Mutate(
      job_name,
      [this, agent](const JobRecord* latest) -> absl::StatusOr<Change> {
        return DisconnectHost(latest, agent, Now());
      },
      [job_name, host = HostNameOf(agent)](const absl::Status& status) {
        if (!status.ok() && !absl::IsUnavailable(status)) {
          spdlog::warn("the lost connection of host '{}' of training job '{}' was not recorded: {}",
                       host, job_name, status.ToString());
        }
      });
}

void TrainingJobManager::ReleaseHostsOfPreviousRun() {
  std::vector<std::string> names;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, entry] : jobs_) {
      if (entry.committed == nullptr || IsSettled(*entry.committed)) continue;
      for (const v1::TrainingHost& host : entry.committed->training_hosts()) {
        // Alone on its storage, every connection the records show is gone;
        // among replicas, only this one's.
        if (host.connected() && (!following_ || host.replica() == options_.replica_id)) {
          names.push_back(name);
          break;
        }
      }
    }
  }
  for (const std::string& name : names) {
    Mutate(
        name,
        [this](const JobRecord* latest) -> absl::StatusOr<Change> {
          return DisconnectReplicaHosts(
              latest, following_ ? std::optional<std::string>(options_.replica_id) : std::nullopt,
              started_at_);
        },
        [](const absl::Status&) {});
  }
}

void TrainingJobManager::Unwatch(const std::shared_ptr<JobWatch>& watch) {
  bool agent_left = false;
  std::optional<HostAgent> host;
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(watch->job_name);
    if (it != jobs_.end()) {
      JobEntry& entry = it->second;
      if (auto held = entry.agent_hosts.find(watch.get()); held != entry.agent_hosts.end()) {
        host = std::move(held->second);
        entry.agent_hosts.erase(held);
        // The same agent reconnected before its old stream ended here: the
        // host stays connected.
        const bool still_held = std::any_of(
            entry.agent_hosts.begin(), entry.agent_hosts.end(), [&](const auto& other) {
              return other.second.agent == host->agent &&
                     HostNameOf(other.second) == HostNameOf(*host);
            });
        if (still_held) host.reset();
      }
      auto& watches = entry.watches;
      watches.erase(std::remove(watches.begin(), watches.end(), watch), watches.end());
      auto agent = std::find(entry.agents.begin(), entry.agents.end(), watch.get());
      if (agent != entry.agents.end()) {
        entry.agents.erase(agent);
        if (entry.agents.empty()) entry.agents_absent_since = Now();
        ArmDeadlineLocked(watch->job_name, entry);
        presence_dirty_.insert(watch->job_name);
        agent_left = true;
      }
    }
  }
  if (agent_left && following_) WakeFollower();
  WatchHub::Detach(*watch);
  if (host.has_value()) DisconnectHostOf(watch->job_name, *std::move(host));
}

}  // namespace debugplane::core
