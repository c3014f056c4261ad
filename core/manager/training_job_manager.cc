#include "core/manager/training_job_manager.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <optional>
#include <thread>
#include <tuple>
#include <variant>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/jobs/field_violations.h"
#include "core/jobs/page_token.h"
#include "core/jobs/rule_actions.h"
#include "core/jobs/validation_text.h"
#include "persistence/lease_fence.h"
#include "spdlog/spdlog.h"

namespace debugplane::core {
namespace {

constexpr int kDefaultMaxResults = 10;

// How long registering a watch waits for the feed to be read (replicas).
constexpr absl::Duration kWatchCatchUpLimit = absl::Seconds(2);

absl::Status JobNotFound(absl::string_view name) {
  return absl::NotFoundError(absl::StrCat("training job '", name, "' does not exist"));
}

persistence::JobRow ToRow(const JobRecord& job, const std::string& encoded) {
  persistence::JobRow row;
  row.name = job.training_job_name();
  row.creation_time_us = ToUnixMicros(job.creation_time());
  row.last_modified_us = ToUnixMicros(job.last_modified_time());
  row.status = std::string(JobStatusName(job.training_job_status()));
  row.record = encoded;
  return row;
}

v1::TrainingJobSummary ToSummary(const JobRecord& job) {
  v1::TrainingJobSummary summary;
  summary.set_training_job_name(job.training_job_name());
  summary.set_training_job_arn(job.training_job_arn());
  *summary.mutable_creation_time() = job.creation_time();
  if (job.has_training_end_time()) *summary.mutable_training_end_time() = job.training_end_time();
  *summary.mutable_last_modified_time() = job.last_modified_time();
  summary.set_training_job_status(job.training_job_status());
  summary.set_secondary_status(job.secondary_status());
  return summary;
}

// The filters of a ListTrainingJobs request, resolved once.
struct ListFilter {
  explicit ListFilter(const v1::ListTrainingJobsRequest& request)
      : name_contains(absl::AsciiStrToLower(request.name_contains())),
        status(request.status_equals()),
        created_after(request.has_creation_time_after()
                          ? ToUnixMicros(request.creation_time_after())
                          : INT64_MIN),
        created_before(request.has_creation_time_before()
                           ? ToUnixMicros(request.creation_time_before())
                           : INT64_MAX),
        modified_after(request.has_last_modified_time_after()
                           ? ToUnixMicros(request.last_modified_time_after())
                           : INT64_MIN),
        modified_before(request.has_last_modified_time_before()
                            ? ToUnixMicros(request.last_modified_time_before())
                            : INT64_MAX) {}

  bool Matches(const JobRecord& job) const {
    if (status != v1::TrainingJobStatus::TRAINING_JOB_STATUS_UNSPECIFIED &&
        job.training_job_status() != status) {
      return false;
    }
    const int64_t created = ToUnixMicros(job.creation_time());
    if (created <= created_after || created >= created_before) return false;
    const int64_t modified = ToUnixMicros(job.last_modified_time());
    if (modified <= modified_after || modified >= modified_before) return false;
    // SageMaker's NameContains is case-insensitive.
    return name_contains.empty() ||
           absl::StrContains(absl::AsciiStrToLower(job.training_job_name()), name_contains);
  }

  std::string name_contains;
  JobStatus status;
  int64_t created_after, created_before, modified_after, modified_before;
};

absl::Status ShuttingDown() {
  return absl::UnavailableError("the server is shutting down; retry on another server");
}

}  // namespace

// The `done` of a commit whose job has watchers: runs (with OK) when the
// last of them has been told of the commit, or skipped it as unregistered.
struct TrainingJobManager::DeliveryCompletion {
  DeliveryCompletion(int watches, DoneCallback done) : remaining(watches), done(std::move(done)) {}
  void CountDown() {
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) std::move(done)(absl::OkStatus());
  }
  std::atomic<int> remaining;
  DoneCallback done;
};

// What one commit (or the registration) tells one watcher, in this order.
struct TrainingJobManager::Delivery {
  std::shared_ptr<const JobRecord> record;                    // OnRecord.
  std::shared_ptr<const v1::WatchTrainingJobResponse> event;  // OnEvent, if any.
  std::optional<absl::Status> end;                            // OnEnd, if any.
  std::shared_ptr<DeliveryCompletion> completion;             // Counted down after.
};

// One registered watcher and what waits to be delivered to it.
struct TrainingJobManager::Watch {
  Watch(JobWatcher* watcher, std::string job_name)
      : watcher(watcher), job_name(std::move(job_name)) {}

  JobWatcher* const watcher;
  const std::string job_name;

  absl::Mutex mu;
  // Queued under the manager's mu_ (so in commit order), delivered by the
  // one drainer.
  std::deque<Delivery> pending ABSL_GUARDED_BY(mu);
  // A drain is scheduled or running: it takes whatever is queued, so nobody
  // else starts one. Always true while `pending` is not empty.
  bool draining ABSL_GUARDED_BY(mu) = false;
  // A callback is running (on `delivering_thread`): Unwatch waits for it,
  // on `delivered`.
  bool delivering ABSL_GUARDED_BY(mu) = false;
  absl::CondVar delivered;
  std::thread::id delivering_thread ABSL_GUARDED_BY(mu);
  // Unregistered: what is still queued is dropped, the watcher not called.
  bool detached ABSL_GUARDED_BY(mu) = false;
};

// Whether the manager is still there, for registrations that outlive it.
struct TrainingJobManager::Liveness {
  explicit Liveness(TrainingJobManager* manager) : manager(manager) {}
  absl::Mutex mu;
  TrainingJobManager* manager ABSL_GUARDED_BY(mu);  // Null once destroyed.
};

class TrainingJobManager::Registration final : public WatchRegistration {
 public:
  Registration(std::shared_ptr<Liveness> liveness, std::shared_ptr<Watch> watch)
      : liveness_(std::move(liveness)), watch_(std::move(watch)) {}
  ~Registration() override {
    // Held (shared) while unwatching: the manager is not destroyed meanwhile.
    absl::ReaderMutexLock lock(&liveness_->mu);
    if (liveness_->manager != nullptr) {
      liveness_->manager->Unwatch(watch_);
    } else {
      // Its Shutdown delivered everything: only later deliveries are ruled out.
      absl::MutexLock watch_lock(&watch_->mu);
      watch_->detached = true;
    }
  }

 private:
  const std::shared_ptr<Liveness> liveness_;
  const std::shared_ptr<Watch> watch_;
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
  manager->deadlines_ = std::make_unique<base::DeadlineTimer>(
      manager->options_.clock,
      [m = manager.get()](const std::string& job_name) { m->OnDeadline(job_name); });
  manager->validation_pool_ =
      std::make_unique<base::ThreadPool>(manager->options_.validation_threads, "dp-validate");
  manager->delivery_pool_ =
      std::make_unique<base::ThreadPool>(manager->options_.watch_delivery_threads, "dp-watch");
  manager->committer_ = std::thread([m = manager.get()] { m->CommitLoop(); });
  if (manager->following_) {
    manager->follower_ = std::thread([m = manager.get()] { m->FollowLoop(); });
    manager->subscription_ =
        manager->storage_->SubscribeToChanges([m = manager.get()] { m->WakeFollower(); });
    spdlog::info("replica '{}': following the change feed from sequence {} ({})",
                 manager->options_.replica_id, manager->feed_stats().applied_sequence,
                 manager->subscription_ != nullptr
                     ? "woken by LISTEN/NOTIFY"
                     : absl::StrCat("polled every ",
                                    absl::FormatDuration(manager->options_.change_poll_interval)));
  }

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
      liveness_(std::make_shared<Liveness>(this)) {}

TrainingJobManager::~TrainingJobManager() {
  Shutdown();
  // Registrations destroyed from now on leave the manager alone.
  absl::MutexLock lock(&liveness_->mu);
  liveness_->manager = nullptr;
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
    queue_cv_.SignalAll();
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
  if (committer_.joinable()) committer_.join();
  WatchesToDrain to_drain;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [name, entry] : jobs_) {
      for (const std::shared_ptr<Watch>& watch : entry.watches) {
        Enqueue(watch, Delivery{.end = absl::UnavailableError("the server is shutting down")},
                to_drain);
      }
      entry.watches.clear();
    }
  }
  if (delivery_pool_ != nullptr) {
    StartDrains(to_drain);
    delivery_pool_->Shutdown();  // Every delivery (and `done`) queued runs first.
  }
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
}

void TrainingJobManager::OnValidationPool(absl::AnyInvocable<void(DoneCallback) &&> work,
                                          DoneCallback done) {
  struct Call {
    absl::AnyInvocable<void(DoneCallback) &&> work;
    DoneCallback done;
  };
  auto call = std::make_shared<Call>(Call{std::move(work), std::move(done)});
  if (validation_pool_->Schedule([call] { std::move(call->work)(std::move(call->done)); })) {
    return;
  }
  std::move(call->done)(ShuttingDown());
}

absl::StatusOr<TrainingJobManager::PendingCommit> TrainingJobManager::ComputeLocked(
    const std::string& job_name, std::shared_ptr<const Mutation> mutation, int attempts) {
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
  absl::Status refused;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) {
      refused = ShuttingDown();
    } else {
      absl::StatusOr<PendingCommit> commit =
          ComputeLocked(job_name, std::make_shared<const Mutation>(mutation), /*attempts=*/1);
      if (!commit.ok()) {
        refused = commit.status();
      } else {
        commit->done = std::move(done);
        commit->fence = std::move(fence);
        queue_.push_back(*std::move(commit));
        queue_cv_.Signal();
        return;
      }
    }
  }
  std::move(done)(std::move(refused));
}

void TrainingJobManager::RetryAfterConflict(std::vector<PendingCommit> commits,
                                            const absl::Status& conflict) {
  std::vector<std::pair<DoneCallback, absl::Status>> failed;
  {
    absl::MutexLock lock(&mu_);
    std::vector<PendingCommit> again;
    for (PendingCommit& commit : commits) {
      absl::StatusOr<PendingCommit> redone = absl::UnavailableError("shutting down");
      if (shutting_down_) {
        redone = ShuttingDown();
      } else if (commit.mutation == nullptr || commit.attempts > options_.max_conflict_retries) {
        redone = absl::AbortedError(absl::StrCat(
            "training job '", commit.job_name, "' kept being changed by other servers: ",
            commit.attempts, " attempts to apply the change failed on a newer version (",
            conflict.message(), "); retry the call"));
      } else {
        redone = ComputeLocked(commit.job_name, commit.mutation, commit.attempts + 1);
      }
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
    for (auto it = again.rbegin(); it != again.rend(); ++it) queue_.push_front(std::move(*it));
    if (!again.empty()) queue_cv_.Signal();
  }
  for (auto& [done, status] : failed) {
    if (done != nullptr) std::move(done)(status);
  }
}

void TrainingJobManager::CommitLoop() {
  // Group commit (see TrainingJobManagerOptions::max_group_wait): how many
  // changes the next group may expect (those queued when the last group was
  // acknowledged, plus its callers coming back), until when, and how long
  // the last write took.
  size_t expected = 0;
  absl::Time acknowledged_at = absl::InfinitePast();
  absl::Duration last_write;
  while (true) {
    std::vector<PendingCommit> group;
    {
      absl::MutexLock lock(&mu_);
      while (queue_.empty() && !shutting_down_) queue_cv_.Wait(&mu_);
      if (queue_.empty()) return;  // Shutting down with nothing left to write.
      WaitForReturningCallersLocked(
          std::min(expected, static_cast<size_t>(std::max(1, options_.max_commit_group))),
          acknowledged_at + std::min(options_.max_group_wait, last_write / 2));
      const size_t take =
          std::min(queue_.size(), static_cast<size_t>(std::max(1, options_.max_commit_group)));
      group.reserve(take);
      for (size_t i = 0; i < take; ++i) {
        group.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }

    // Built by BuildBatch (snapshots are immutable): each write expects the
    // version its change was computed against, under its lease's fence.
    persistence::WriteBatch batch;
    // Changes taken out of the group (and queue) because a lease fence
    // refused them; the rest of the group is written again without them.
    std::vector<PendingCommit> fenced_out;
    absl::Status fence_refusal;
    WatchesToDrain to_drain;
    size_t queued_behind = 0;  // Queued before this group is acknowledged.
    absl::Status written;
    bool conflict = false;
    {
      // The write and its publication are one step for the feed thread: it
      // never applies this write as another server's, and observers hear
      // every change in storage order.
      absl::MutexLock apply(&apply_mu_);
      const absl::Time write_start = Now();
      absl::StatusOr<persistence::WriteResult> result;
      while (true) {
        batch = BuildBatch(group);
        result = batch.empty() ? persistence::WriteResult{} : storage_->WriteAndReport(batch);
        const std::optional<std::string> stale = persistence::FencedJob(result.status());
        if (!stale.has_value()) break;
        fence_refusal = result.status();
        if (!TakeOutFenced(*stale, group, fenced_out)) break;  // Not ours: fails as any error.
      }
      written = result.status();
      const absl::Time now = Now();
      if (!batch.empty()) last_write = now - write_start;
      Observed observed;
      {
        absl::MutexLock lock(&mu_);
        if (!batch.empty()) {
          ++commit_stats_.writes;
          commit_stats_.changes += std::count_if(
              batch.ops().begin(), batch.ops().end(), [](const persistence::WriteOp& op) {
                return !std::holds_alternative<persistence::CheckLease>(op);
              });
          commit_stats_.writing += last_write;
        }
        if (written.ok()) {
          size_t op = 0;
          for (PendingCommit& commit : group) {
            if (!commit.changed) {
              PublishLocked(commit, now, 0, 0, to_drain);
              continue;
            }
            // The batch's lease checks have entries of their own.
            while (op < batch.size() &&
                   std::holds_alternative<persistence::CheckLease>(batch.ops()[op])) {
              ++op;
            }
            // Storages without versions report none: counted here.
            const int64_t sequence = op < result->sequences.size() ? result->sequences[op] : 0;
            const int64_t version = op < result->versions.size() ? result->versions[op]
                                    : commit.next == nullptr     ? persistence::kAbsent
                                                                 : commit.expected_version + 1;
            ++op;
            observed.emplace_back(commit.job_name, commit.next);
            PublishLocked(commit, now, sequence, version, to_drain);
          }
        } else {
          conflict = written.code() == absl::StatusCode::kAborted && following_;
          if (conflict) {
            ++feed_stats_.conflicts;
            spdlog::info("replica '{}': {}; reading the other servers' changes and trying again",
                         options_.replica_id, std::string(written.message()));
          } else {
            spdlog::error("storage write of {} change(s) failed: {}", batch.size(),
                          written.ToString());
          }
          // Everything queued behind the failed group may build on it: fail
          // it (or compute it again) too, and roll every job back to its
          // committed state.
          while (!queue_.empty()) {
            group.push_back(std::move(queue_.front()));
            queue_.pop_front();
          }
          for (const PendingCommit& commit : group) {
            if (commit.changed) RollBackLocked(commit.job_name);
          }
        }
        queued_behind = queue_.size();
      }
      if (written.ok()) CallObservers(observed);
    }
    if (conflict) {
      // The write lost to another server's: its change is in the feed.
      if (absl::Status caught_up = CatchUp(); !caught_up.ok()) {
        spdlog::warn("replica '{}': cannot read the change feed after a conflict: {}",
                     options_.replica_id, caught_up.ToString());
      }
    }
    // Watchers are told on the delivery pool; the next group need not wait.
    StartDrains(to_drain);
    for (PendingCommit& commit : fenced_out) {
      if (commit.done == nullptr) continue;
      std::move(commit.done)(
          commit.fence.has_value() &&
                  persistence::FencedJob(fence_refusal) == commit.fence->job_name
              ? fence_refusal
              : absl::UnavailableError(absl::StrCat(
                    "the change was not saved and not applied: it followed a change of the same "
                    "job that a stale evaluation lease made (",
                    fence_refusal.message(), "); retry")));
    }
    if (conflict) {
      RetryAfterConflict(std::move(group), written);
      acknowledged_at = Now();
      expected = 0;
      continue;
    }

    const absl::Status reply =
        written.ok() ? absl::OkStatus()
        : written.code() == absl::StatusCode::kAborted
            ? absl::AbortedError(
                  absl::StrCat("the change was not saved and not applied: ", written.message()))
            : absl::UnavailableError(
                  absl::StrCat("the change was not saved and not applied: storage failed (",
                               written.message(), "); retry later"));
    // The rest went with their deliveries (PublishLocked).
    for (PendingCommit& commit : group) {
      if (commit.done != nullptr) std::move(commit.done)(reply);
    }
    // Those queued since are (some of) the callers coming back; after a
    // failure nobody is expected.
    acknowledged_at = Now();
    expected = written.ok() ? queued_behind + group.size() : 0;
  }
}

persistence::WriteBatch TrainingJobManager::BuildBatch(std::vector<PendingCommit>& group) {
  persistence::WriteBatch batch;
  std::set<std::tuple<std::string, std::string, int64_t>> fences;
  for (PendingCommit& commit : group) {
    if (!commit.changed) continue;
    if (commit.fence.has_value() &&
        fences.emplace(commit.fence->job_name, commit.fence->owner, commit.fence->token).second) {
      batch.Check(*commit.fence);
    }
    if (commit.next != nullptr) {
      if (commit.encoded == nullptr) {
        commit.encoded = std::make_shared<const std::string>(commit.next->SerializeAsString());
      }
      batch.Put(ToRow(*commit.next, *commit.encoded), commit.expected_version);
    } else {
      batch.Delete(commit.job_name, commit.expected_version);
    }
  }
  return batch;
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
  const auto move_out = [&](auto& from) {
    for (auto it = from.begin(); it != from.end();) {
      if (goes(*it)) {
        taken.push_back(std::move(*it));
        it = from.erase(it);
      } else {
        ++it;
      }
    }
  };
  const size_t before = taken.size();
  move_out(group);
  move_out(queue_);
  for (const std::string& job : touched) RollBackLocked(job);
  return taken.size() > before;
}

void TrainingJobManager::CallObservers(const Observed& observed) {
  if (observed.empty()) return;
  absl::ReaderMutexLock lock(&observers_mu_);
  for (const auto& [name, job] : observed) {
    for (const auto& [id, observer] : observers_) observer(name, job);
  }
}

void TrainingJobManager::WaitForReturningCallersLocked(size_t expected, absl::Time until) {
  if (queue_.size() >= expected) return;
  const absl::Time start = Now();
  const absl::Duration left = until - start;
  if (left <= absl::ZeroDuration()) return;
  // The wait is in real time, at most `left` (a clock that moves only when
  // told, in tests, bounds nothing).
  const absl::Time real_until = absl::Now() + std::min(left, options_.clock->RealTimeUntil(until));
  while (queue_.size() < expected && !shutting_down_) {
    if (queue_cv_.WaitWithTimeout(&mu_, real_until - absl::Now())) break;  // Timed out.
  }
  commit_stats_.waiting += Now() - start;
}

void TrainingJobManager::PublishLocked(PendingCommit& commit, absl::Time now, int64_t sequence,
                                       int64_t version, WatchesToDrain& to_drain) {
  if (!commit.changed) return;
  auto it = jobs_.find(commit.job_name);
  if (it == jobs_.end()) return;  // Cannot happen: the entry has a queued change.
  JobEntry& entry = it->second;
  --entry.queued_changes;
  std::shared_ptr<const JobRecord> before = std::move(entry.committed);
  entry.committed = commit.next;
  entry.committed_encoded = commit.encoded;
  entry.version = version;
  if (entry.queued_changes == 0) entry.latest_version = version;
  entry.sequence = std::max(entry.sequence, sequence);
  if (entry.committed == nullptr && following_ && sequence > applied_through_) {
    tombstones_[commit.job_name] = sequence;
  }
  IndexLocked(commit.job_name, before.get(), entry.committed.get());
  ArmDeadlineLocked(commit.job_name, entry);
  if (entry.committed == nullptr) entry.agents.clear();  // Their streams end below.
  commit.done =
      NotifyWatchesLocked(commit.job_name, entry, before, now, std::move(commit.done), to_drain);
  if (entry.committed == nullptr && entry.latest == nullptr && entry.queued_changes == 0 &&
      entry.watches.empty()) {
    jobs_.erase(it);
  }
}

DoneCallback TrainingJobManager::NotifyWatchesLocked(const std::string& job_name, JobEntry& entry,
                                                     const std::shared_ptr<const JobRecord>& before,
                                                     absl::Time now, DoneCallback done,
                                                     WatchesToDrain& to_drain) {
  if (entry.watches.empty()) return done;
  // Only the news is made here (the diff and one shared event); the
  // watchers are called by the delivery pool, outside the lock.
  Delivery news;
  if (entry.committed == nullptr) {
    news.end = absl::NotFoundError(absl::StrCat("training job '", job_name, "' was deleted"));
  } else {
    news.record = entry.committed;
    std::vector<v1::StatusChange> changes = before == nullptr
                                                ? std::vector<v1::StatusChange>{}
                                                : DiffForWatch(*before, *entry.committed);
    if (!changes.empty()) {
      news.event = std::make_shared<const v1::WatchTrainingJobResponse>(
          MakeWatchEvent(*entry.committed, std::move(changes), now));
    }
    if (IsSettled(*entry.committed)) news.end = absl::OkStatus();
  }
  if (done != nullptr) {
    news.completion = std::make_shared<DeliveryCompletion>(static_cast<int>(entry.watches.size()),
                                                           std::move(done));
  }
  for (const std::shared_ptr<Watch>& watch : entry.watches) Enqueue(watch, news, to_drain);
  if (news.end.has_value()) entry.watches.clear();  // Their streams are over.
  return nullptr;
}

void TrainingJobManager::Enqueue(const std::shared_ptr<Watch>& watch, Delivery delivery,
                                 WatchesToDrain& to_drain) {
  absl::MutexLock lock(&watch->mu);
  watch->pending.push_back(std::move(delivery));
  if (!watch->draining) {
    watch->draining = true;
    to_drain.push_back(watch);
  }
}

void TrainingJobManager::StartDrains(WatchesToDrain& to_drain) {
  for (std::shared_ptr<Watch>& watch : to_drain) {
    // Refused only once Shutdown has drained the pool (a registration that
    // raced with it): then this thread delivers.
    if (!delivery_pool_->Schedule([watch] { Drain(*watch); })) Drain(*watch);
  }
  to_drain.clear();
}

void TrainingJobManager::Drain(Watch& watch) {
  watch.mu.Lock();
  while (!watch.pending.empty()) {
    Delivery delivery = std::move(watch.pending.front());
    watch.pending.pop_front();
    if (!watch.detached) {
      watch.delivering = true;
      watch.delivering_thread = std::this_thread::get_id();
      watch.mu.Unlock();
      JobWatcher& watcher = *watch.watcher;
      if (delivery.record != nullptr) watcher.OnRecord(delivery.record);
      if (delivery.event != nullptr) watcher.OnEvent(std::move(delivery.event));
      if (delivery.end.has_value()) watcher.OnEnd(*std::move(delivery.end));
      watch.mu.Lock();
      watch.delivering = false;
      if (watch.detached) watch.delivered.SignalAll();
    }
    if (delivery.completion != nullptr) {
      // The change's `done` may run here: not under the watch's lock.
      watch.mu.Unlock();
      delivery.completion->CountDown();
      delivery.completion = nullptr;
      watch.mu.Lock();
    }
  }
  watch.draining = false;
  watch.mu.Unlock();
}

void TrainingJobManager::RollBackLocked(const std::string& job_name) {
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
  if (before != nullptr) {
    by_creation_.erase({ToUnixMicros(before->creation_time()), name});
    --committed_count_;
  }
  if (after != nullptr) {
    by_creation_.insert({ToUnixMicros(after->creation_time()), name});
    ++committed_count_;
  }
}

AgentPresence TrainingJobManager::PresenceLocked(const JobEntry& entry) const {
  return AgentPresence{.connected = static_cast<int>(entry.agents.size()),
                       .absent_since = std::max(entry.agents_absent_since, started_at_)};
}

void TrainingJobManager::ArmDeadlineLocked(const std::string& job_name, const JobEntry& entry) {
  if (deadlines_ == nullptr) return;  // Still loading: Create arms them all.
  const JobRecord* job = entry.committed.get();
  std::optional<absl::Time> deadline;
  if (job != nullptr && job->training_job_status() == v1::TrainingJobStatus::Stopping) {
    deadline = PlanStopCompletion(*job, PresenceLocked(entry), options_.stop_wait).at;
  } else if (job != nullptr) {
    deadline = MaxRuntimeDeadline(*job);
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
        if (latest == nullptr) return Change{.changed = false};
        const absl::Time now = Now();
        auto next = std::make_shared<JobRecord>(*latest);
        // The deadline was computed from the committed record; the latest
        // one decides (a change may be queued, an agent may have come).
        std::optional<absl::Time> deadline;
        if (latest->training_job_status() == v1::TrainingJobStatus::Stopping) {
          AgentPresence presence = PresenceLocked(jobs_.at(job_name));
          presence.connected += remote.connected;
          presence.absent_since = std::max(presence.absent_since, remote.absent_since);
          const StopCompletion plan = PlanStopCompletion(*latest, presence, options_.stop_wait);
          if (plan.at <= now && CompleteStop(*next, now, plan.message)) {
            return Change{.next = std::move(next)};
          }
          deadline = plan.at;
        } else {
          deadline = MaxRuntimeDeadline(*latest);
          if (deadline.has_value() && *deadline <= now && BeginMaxRuntimeStop(*next, now)) {
            return Change{.next = std::move(next)};
          }
        }
        // Not due yet: wait again (the commit of a change re-arms it too).
        if (deadline.has_value()) deadlines_->Set(job_name, *deadline);
        return Change{.changed = false};
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

// --- Operations ---------------------------------------------------------------

void TrainingJobManager::CreateTrainingJob(const v1::CreateTrainingJobRequest& request,
                                           v1::CreateTrainingJobResponse* response,
                                           DoneCallback done) {
  // Output paths are checked against the file system: not on this thread.
  OnValidationPool([this, &request, response](
                       DoneCallback done) { CreateValidated(request, response, std::move(done)); },
                   std::move(done));
}

void TrainingJobManager::CreateValidated(const v1::CreateTrainingJobRequest& request,
                                         v1::CreateTrainingJobResponse* response,
                                         DoneCallback done) {
  if (absl::Status valid = ValidateCreateTrainingJobRequest(request, options_.validation);
      !valid.ok()) {
    std::move(done)(std::move(valid));
    return;
  }
  auto record = std::make_shared<const JobRecord>(NewJobRecord(request, options_.arn_scope, Now()));
  // Encoded here, in parallel with other calls, rather than on the committer.
  auto encoded = std::make_shared<const std::string>(record->SerializeAsString());
  std::vector<std::string> warnings = CreateTrainingJobWarnings(request, options_.validation);
  Mutate(
      request.training_job_name(),
      [record, encoded](const JobRecord* latest) -> absl::StatusOr<Change> {
        if (latest != nullptr) {
          return absl::AlreadyExistsError(
              absl::StrCat("a training job named '", record->training_job_name(),
                           "' already exists; names are unique until the job is deleted"));
        }
        return Change{.next = record, .encoded = encoded};
      },
      [record, warnings = std::move(warnings), response,
       done = std::move(done)](const absl::Status& status) mutable {
        if (status.ok()) {
          response->set_training_job_arn(record->training_job_arn());
          for (std::string& warning : warnings) response->add_warnings(std::move(warning));
        }
        std::move(done)(status);
      });
}

void TrainingJobManager::DescribeTrainingJob(const v1::DescribeTrainingJobRequest& request,
                                             v1::DescribeTrainingJobResponse* response,
                                             DoneCallback done) {
  if (absl::Status valid = ValidateTrainingJobName(request.training_job_name()); !valid.ok()) {
    std::move(done)(std::move(valid));
    return;
  }
  AfterCaughtUp(
      [this, &request, response](DoneCallback read_done) {
        DescribeCommitted(request, response, std::move(read_done));
      },
      std::move(done));
}

void TrainingJobManager::AfterCaughtUp(absl::AnyInvocable<void(DoneCallback) &&> read,
                                       DoneCallback done) {
  if (!following_) {
    std::move(read)(std::move(done));
    return;
  }
  // Read-your-writes: answered once the other servers' changes are in.
  AwaitCaughtUp([read = std::move(read), done = std::move(done)](absl::Status caught_up) mutable {
    if (!caught_up.ok()) {
      std::move(done)(std::move(caught_up));
      return;
    }
    std::move(read)(std::move(done));
  });
}

void TrainingJobManager::DescribeCommitted(const v1::DescribeTrainingJobRequest& request,
                                           v1::DescribeTrainingJobResponse* response,
                                           DoneCallback done) {
  std::shared_ptr<const JobRecord> job = GetJob(request.training_job_name());
  if (job == nullptr) {
    std::move(done)(JobNotFound(request.training_job_name()));
    return;
  }
  *response = *job;
  std::move(done)(absl::OkStatus());
}

absl::StatusOr<std::shared_ptr<const std::string>> TrainingJobManager::DescribeTrainingJobEncoded(
    const v1::DescribeTrainingJobRequest& request) {
  if (absl::Status valid = ValidateTrainingJobName(request.training_job_name()); !valid.ok()) {
    return valid;
  }
  absl::ReaderMutexLock lock(&mu_);
  auto it = jobs_.find(request.training_job_name());
  if (it == jobs_.end() || it->second.committed_encoded == nullptr) {
    return JobNotFound(request.training_job_name());
  }
  return it->second.committed_encoded;
}

void TrainingJobManager::ListTrainingJobs(const v1::ListTrainingJobsRequest& request,
                                          v1::ListTrainingJobsResponse* response,
                                          DoneCallback done) {
  if (absl::Status valid = ValidateListTrainingJobsRequest(request); !valid.ok()) {
    std::move(done)(std::move(valid));
    return;
  }
  AfterCaughtUp(
      [this, &request, response](DoneCallback read_done) {
        ListCommitted(request, response, std::move(read_done));
      },
      std::move(done));
}

void TrainingJobManager::ListCommitted(const v1::ListTrainingJobsRequest& request,
                                       v1::ListTrainingJobsResponse* response, DoneCallback done) {
  const uint32_t fingerprint = QueryFingerprint(request);
  absl::optional<PageToken> after;
  if (!request.next_token().empty()) {
    absl::StatusOr<PageToken> token = DecodePageToken(request.next_token());
    if (!token.ok()) {
      std::move(done)(token.status());
      return;
    }
    if (token->query_fingerprint != fingerprint) {
      std::move(done)(
          InvalidField("NextToken",
                       "this NextToken belongs to a query with other filters or sort order; "
                       "repeat the original query's parameters with it"));
      return;
    }
    after = *std::move(token);
  }
  // Validation allows only these values; empty means the default.
  const std::string sort_by = request.sort_by().empty() ? "CreationTime" : request.sort_by();
  const bool descending = request.sort_order() != "Ascending";
  const size_t limit = request.has_max_results() ? request.max_results() : kDefaultMaxResults;
  const ListFilter filter(request);

  // Collect up to limit + 1 matches to learn whether another page follows.
  std::vector<std::shared_ptr<const JobRecord>> page;
  {
    absl::ReaderMutexLock lock(&mu_);
    auto take = [&](const std::shared_ptr<const JobRecord>& job) {
      if (job != nullptr && filter.Matches(*job)) page.push_back(job);
      return page.size() > limit;
    };
    if (sort_by == "Name") {
      if (descending) {
        auto it = after ? jobs_.lower_bound(after->last_name) : jobs_.end();
        while (it != jobs_.begin()) {
          --it;
          if (take(it->second.committed)) break;
        }
      } else {
        for (auto it = after ? jobs_.upper_bound(after->last_name) : jobs_.begin();
             it != jobs_.end(); ++it) {
          if (take(it->second.committed)) break;
        }
      }
    } else if (sort_by == "CreationTime") {
      const std::pair<int64_t, std::string> key =
          after ? std::make_pair(after->last_creation_time_us, after->last_name)
                : std::make_pair(int64_t{0}, std::string());
      if (descending) {
        auto it = after ? by_creation_.lower_bound(key) : by_creation_.end();
        while (it != by_creation_.begin()) {
          --it;
          if (take(jobs_.at(it->second).committed)) break;
        }
      } else {
        for (auto it = after ? by_creation_.upper_bound(key) : by_creation_.begin();
             it != by_creation_.end(); ++it) {
          if (take(jobs_.at(it->second).committed)) break;
        }
      }
    } else {
      // By status (then name): rare enough to sort the matches per call.
      std::vector<std::shared_ptr<const JobRecord>> all;
      for (const auto& [name, entry] : jobs_) {
        if (entry.committed != nullptr && filter.Matches(*entry.committed)) {
          all.push_back(entry.committed);
        }
      }
      auto key_of = [](const JobRecord& job) {
        return std::make_pair(std::string(JobStatusName(job.training_job_status())),
                              job.training_job_name());
      };
      std::sort(all.begin(), all.end(), [&](const auto& a, const auto& b) {
        return descending ? key_of(*b) < key_of(*a) : key_of(*a) < key_of(*b);
      });
      const auto after_key =
          after ? std::make_pair(after->last_status, after->last_name) : std::make_pair("", "");
      for (const auto& job : all) {
        if (after) {
          const auto key = key_of(*job);
          if (descending ? !(key < after_key) : !(after_key < key)) continue;
        }
        page.push_back(job);
        if (page.size() > limit) break;
      }
    }
  }

  const bool more = page.size() > limit;
  if (more) page.resize(limit);
  for (const auto& job : page) *response->add_training_job_summaries() = ToSummary(*job);
  if (more && !page.empty()) {
    const JobRecord& last = *page.back();
    response->set_next_token(
        EncodePageToken({.query_fingerprint = fingerprint,
                         .last_creation_time_us = ToUnixMicros(last.creation_time()),
                         .last_status = std::string(JobStatusName(last.training_job_status())),
                         .last_name = last.training_job_name()}));
  }
  std::move(done)(absl::OkStatus());
}

void TrainingJobManager::UpdateTrainingJob(const v1::UpdateTrainingJobRequest& request,
                                           v1::UpdateTrainingJobResponse* response,
                                           DoneCallback done) {
  // ProfilerConfig.S3OutputPath is checked against the file system: not on
  // this thread.
  OnValidationPool([this, &request, response](
                       DoneCallback done) { UpdateValidated(request, response, std::move(done)); },
                   std::move(done));
}

void TrainingJobManager::UpdateValidated(const v1::UpdateTrainingJobRequest& request,
                                         v1::UpdateTrainingJobResponse* response,
                                         DoneCallback done) {
  if (absl::Status valid = ValidateUpdateTrainingJobRequest(request, options_.validation);
      !valid.ok()) {
    std::move(done)(std::move(valid));
    return;
  }
  if (!request.has_profiler_config() && request.profiler_rule_configurations().empty()) {
    std::move(done)(
        InvalidField("ProfilerConfig",
                     "nothing to update: give ProfilerConfig, ProfilerRuleConfigurations "
                     "or both"));
    return;
  }
  auto update = std::make_shared<const v1::UpdateTrainingJobRequest>(request);
  // Filled by the mutation (it needs the job's current profiler config),
  // read by the callback once the change is committed.
  auto warnings = std::make_shared<std::vector<std::string>>();
  Mutate(
      request.training_job_name(),
      [this, update, warnings](const JobRecord* latest) -> absl::StatusOr<Change> {
        if (latest == nullptr) return JobNotFound(update->training_job_name());
        if (latest->training_job_status() != v1::TrainingJobStatus::InProgress) {
          return absl::FailedPreconditionError(
              absl::StrCat("training job '", latest->training_job_name(), "' is ",
                           JobStatusName(latest->training_job_status()),
                           "; UpdateTrainingJob applies only while it is InProgress"));
        }
        // Rule names must stay unique across both lists, 20 profiler rules at most.
        FieldViolations violations;
        const int total = latest->profiler_rule_configurations_size() +
                          update->profiler_rule_configurations_size();
        if (total > kMaxRulesPerKind) {
          violations.Add(
              "ProfilerRuleConfigurations",
              absl::StrCat("the job has ", latest->profiler_rule_configurations_size(),
                           " profiler rules; adding ", update->profiler_rule_configurations_size(),
                           " would make ", total, ", more than the limit of ", kMaxRulesPerKind));
        }
        auto exists = [&](const std::string& name) {
          for (const auto& r : latest->debug_rule_configurations()) {
            if (r.rule_configuration_name() == name) return true;
          }
          for (const auto& r : latest->profiler_rule_configurations()) {
            if (r.rule_configuration_name() == name) return true;
          }
          return false;
        };
        for (int i = 0; i < update->profiler_rule_configurations_size(); ++i) {
          const std::string& name =
              update->profiler_rule_configurations(i).rule_configuration_name();
          if (exists(name)) {
            violations.Add(
                absl::StrCat("ProfilerRuleConfigurations[", i, "].RuleConfigurationName"),
                absl::StrCat("the job already has a rule named '", name, "'"));
          }
        }
        if (!violations.empty()) return violations.ToStatus();
        *warnings = UpdateTrainingJobWarnings(*update, latest->profiler_config());

        const absl::Time now = Now();
        auto next = std::make_shared<JobRecord>(*latest);
        if (update->has_profiler_config()) {
          const v1::ProfilerConfigForUpdate& change = update->profiler_config();
          v1::ProfilerConfig* config = next->mutable_profiler_config();
          if (change.has_disable_profiler() && change.disable_profiler()) {
            config->set_disable_profiler(true);
            next->set_profiling_status(v1::ProfilingStatus::Disabled);
          } else {
            // Any other profiler change turns profiling (back) on.
            config->set_disable_profiler(false);
            next->set_profiling_status(v1::ProfilingStatus::Enabled);
            if (change.has_profiling_interval_in_milliseconds()) {
              config->set_profiling_interval_in_milliseconds(
                  change.profiling_interval_in_milliseconds());
            }
            if (!change.s3_output_path().empty()) {
              config->set_s3_output_path(change.s3_output_path());
            }
            for (const auto& [key, value] : change.profiling_parameters()) {
              (*config->mutable_profiling_parameters())[key] = value;
            }
          }
        }
        for (const auto& rule : update->profiler_rule_configurations()) {
          *next->add_profiler_rule_configurations() = rule;
          auto* status = next->add_profiler_rule_evaluation_statuses();
          status->set_rule_configuration_name(rule.rule_configuration_name());
          status->set_rule_evaluation_job_arn(RuleEvaluationJobArn(
              options_.arn_scope, next->training_job_name(), rule.rule_configuration_name(), now));
          status->set_rule_evaluation_status(v1::RuleEvaluationStatus::InProgress);
          SetTimestamp(now, status->mutable_last_modified_time());
        }
        next->set_config_version(latest->config_version() + 1);
        SetTimestamp(now, next->mutable_last_modified_time());
        RecordConfigurationUpdate(*next, *update, now);
        return Change{.next = std::move(next)};
      },
      [this, update, warnings, response,
       done = std::move(done)](const absl::Status& status) mutable {
        if (status.ok()) {
          response->set_training_job_arn(
              TrainingJobArn(options_.arn_scope, update->training_job_name()));
          for (const std::string& warning : *warnings) response->add_warnings(warning);
        }
        std::move(done)(status);
      });
}

void TrainingJobManager::StopTrainingJob(const v1::StopTrainingJobRequest& request,
                                         v1::StopTrainingJobResponse* response, DoneCallback done) {
  if (absl::Status valid = ValidateTrainingJobName(request.training_job_name()); !valid.ok()) {
    std::move(done)(std::move(valid));
    return;
  }
  const std::string& name = request.training_job_name();
  Mutate(
      name,
      [this, name](const JobRecord* latest) -> absl::StatusOr<Change> {
        if (latest == nullptr) return JobNotFound(name);
        auto next = std::make_shared<JobRecord>(*latest);
        // Stopping a job that is stopping or finished is a no-op, as in
        // SageMaker. Stopped follows when the agent reports the process gone
        // (or the wait for that ends: the deadline armed at the commit).
        if (!BeginStop(*next, Now())) return Change{.changed = false};
        return Change{.next = std::move(next)};
      },
      std::move(done));
}

void TrainingJobManager::DeleteTrainingJob(const v1::DeleteTrainingJobRequest& request,
                                           v1::DeleteTrainingJobResponse* response,
                                           DoneCallback done) {
  if (absl::Status valid = ValidateTrainingJobName(request.training_job_name()); !valid.ok()) {
    std::move(done)(std::move(valid));
    return;
  }
  const std::string& name = request.training_job_name();
  Mutate(
      name,
      [name](const JobRecord* latest) -> absl::StatusOr<Change> {
        if (latest == nullptr) return JobNotFound(name);
        if (!IsTerminal(latest->training_job_status())) {
          return absl::FailedPreconditionError(absl::StrCat(
              "training job '", name, "' is ", JobStatusName(latest->training_job_status()),
              "; only Completed, Failed or Stopped jobs can be deleted (stop it first)"));
        }
        return Change{.next = nullptr};
      },
      std::move(done));
}

absl::StatusOr<std::unique_ptr<WatchRegistration>> TrainingJobManager::WatchTrainingJob(
    const v1::WatchTrainingJobRequest& request, JobWatcher* watcher) {
  return RegisterWatch(request.training_job_name(), watcher, /*agent=*/false);
}

absl::StatusOr<std::unique_ptr<WatchRegistration>> TrainingJobManager::WatchAsAgent(
    const std::string& job_name, JobWatcher* watcher) {
  return RegisterWatch(job_name, watcher, /*agent=*/true);
}

absl::StatusOr<std::unique_ptr<WatchRegistration>> TrainingJobManager::RegisterWatch(
    const std::string& job_name, JobWatcher* watcher, bool agent) {
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
  auto watch = std::make_shared<Watch>(watcher, job_name);
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return absl::UnavailableError("the server is shutting down");
    auto it = jobs_.find(job_name);
    if (it == jobs_.end() || it->second.committed == nullptr) return JobNotFound(job_name);
    JobEntry& entry = it->second;
    const bool settled = IsSettled(*entry.committed);
    {
      // Queued under mu_, so every later commit queues behind it; this
      // thread is its drainer (DeliverInitialState, which makes the event).
      absl::MutexLock watch_lock(&watch->mu);
      watch->pending.push_back(
          Delivery{.record = entry.committed,
                   .end = settled ? std::optional<absl::Status>(absl::OkStatus()) : std::nullopt});
      watch->draining = true;
    }
    if (!settled) {
      entry.watches.push_back(watch);
      if (agent) {
        entry.agents.push_back(watch.get());
        ArmDeadlineLocked(job_name, entry);  // A stop now waits for this agent.
        presence_dirty_.insert(job_name);    // For the other servers.
      }
    }
  }
  if (agent && following_) WakeFollower();
  DeliverInitialState(watch);
  return std::make_unique<Registration>(liveness_, std::move(watch));
}

void TrainingJobManager::DeliverInitialState(const std::shared_ptr<Watch>& watch) {
  Watch& w = *watch;
  w.mu.Lock();
  // RegisterWatch queued the initial state first and set `draining`: this
  // thread is the drainer until it hands over.
  Delivery initial = std::move(w.pending.front());
  w.pending.pop_front();
  w.delivering = true;
  w.delivering_thread = std::this_thread::get_id();
  w.mu.Unlock();
  const JobRecord& job = *initial.record;
  v1::StatusChange change;
  change.set_kind(v1::StatusChange::KIND_INITIAL_STATE);
  change.set_to(absl::StrCat(JobStatusName(job.training_job_status()), "/",
                             SecondaryStatusName(job.secondary_status())));
  w.watcher->OnRecord(initial.record);
  w.watcher->OnEvent(
      std::make_shared<const v1::WatchTrainingJobResponse>(MakeWatchEvent(job, {change}, Now())));
  if (initial.end.has_value()) w.watcher->OnEnd(*std::move(initial.end));
  w.mu.Lock();
  w.delivering = false;
  if (w.detached) w.delivered.SignalAll();
  // Commits that came meanwhile go to the pool, with their `done`s.
  const bool more = !w.pending.empty();
  if (!more) w.draining = false;
  w.mu.Unlock();
  if (more) {
    WatchesToDrain to_drain = {watch};
    StartDrains(to_drain);
  }
}

void TrainingJobManager::Unwatch(const std::shared_ptr<Watch>& watch) {
  bool agent_left = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(watch->job_name);
    if (it != jobs_.end()) {
      JobEntry& entry = it->second;
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
  // Nothing is queued on it from now on; what is queued is dropped by its
  // drain. Wait for a callback in progress, unless it is this thread's own.
  absl::MutexLock lock(&watch->mu);
  watch->detached = true;
  if (watch->delivering && watch->delivering_thread == std::this_thread::get_id()) return;
  while (watch->delivering) watch->delivered.Wait(&watch->mu);
}

void TrainingJobManager::SetRuleEvaluationStatus(const std::string& job_name,
                                                 const std::string& rule_name, RuleStatus status,
                                                 std::string details, DoneCallback done,
                                                 std::optional<persistence::CheckLease> fence) {
  Mutate(
      job_name,
      [this, job_name, rule_name, status,
       details = std::move(details)](const JobRecord* latest) -> absl::StatusOr<Change> {
        if (latest == nullptr) return JobNotFound(job_name);
        auto next = std::make_shared<JobRecord>(*latest);
        if (SetRuleStatus(*next, rule_name, status, details, Now())) {
          return Change{.next = std::move(next)};
        }
        auto current = [&]() -> absl::optional<RuleStatus> {
          for (const auto& r : latest->debug_rule_evaluation_statuses()) {
            if (r.rule_configuration_name() == rule_name) return r.rule_evaluation_status();
          }
          for (const auto& r : latest->profiler_rule_evaluation_statuses()) {
            if (r.rule_configuration_name() == rule_name) return r.rule_evaluation_status();
          }
          return absl::nullopt;
        }();
        if (!current.has_value()) {
          return absl::NotFoundError(absl::StrCat(
              "training job '", job_name, "' has no rule configuration named '", rule_name, "'"));
        }
        if (IsTerminal(*current) && *current != status) {
          return absl::FailedPreconditionError(
              absl::StrCat("rule '", rule_name, "' of training job '", job_name,
                           "' already ended as ", RuleStatusName(*current)));
        }
        return Change{.changed = false};
      },
      std::move(done), std::move(fence));
}

TrainingJobManager::Observation TrainingJobManager::AddCommitObserver(CommitObserver observer) {
  Observation observation;
  // Register first, then take the snapshot (the two locks never nest, so an
  // observer may call the manager while holding its own lock): a commit
  // whose notification comes after the registration reaches the observer,
  // and one whose notification came before it was published before it, so
  // it is in the snapshot.
  {
    absl::MutexLock lock(&observers_mu_);
    observation.id = next_observer_id_++;
    observers_.emplace(observation.id, std::move(observer));
  }
  absl::ReaderMutexLock lock(&mu_);
  observation.jobs.reserve(committed_count_);
  for (const auto& [name, entry] : jobs_) {
    if (entry.committed != nullptr) observation.jobs.push_back(entry.committed);
  }
  return observation;
}

void TrainingJobManager::RemoveCommitObserver(int64_t id) {
  absl::MutexLock lock(&observers_mu_);
  observers_.erase(id);
}

void TrainingJobManager::RecordRuleProgress(const std::string& job_name,
                                            std::vector<RuleProgress> progress, DoneCallback done,
                                            std::optional<persistence::CheckLease> fence) {
  Mutate(
      job_name,
      [job_name,
       progress = std::move(progress)](const JobRecord* latest) -> absl::StatusOr<Change> {
        if (latest == nullptr) return JobNotFound(job_name);
        auto next = std::make_shared<JobRecord>(*latest);
        bool changed = false;
        for (const RuleProgress& rule : progress) changed |= SetRuleProgress(*next, rule);
        if (!changed) return Change{.changed = false};
        return Change{.next = std::move(next)};
      },
      std::move(done), std::move(fence));
}

void TrainingJobManager::SetRuleActionStatus(const std::string& job_name,
                                             const std::string& action_id,
                                             v1::RuleActionStatus::Value status,
                                             std::string details, int attempts, DoneCallback done,
                                             std::optional<persistence::CheckLease> fence) {
  Mutate(
      job_name,
      [this, job_name, action_id, status, attempts,
       details = std::move(details)](const JobRecord* latest) -> absl::StatusOr<Change> {
        if (latest == nullptr) return JobNotFound(job_name);
        auto next = std::make_shared<JobRecord>(*latest);
        if (core::SetRuleActionStatus(*next, action_id, status, details, attempts, Now())) {
          return Change{.next = std::move(next)};
        }
        for (const auto& action : latest->rule_actions()) {
          if (action.action_id() != action_id) continue;
          if (action.status() != v1::RuleActionStatus::Pending) {
            return absl::FailedPreconditionError(
                absl::StrCat("rule action '", action_id, "' is already ",
                             RuleActionStatusName(action.status())));
          }
          return Change{.changed = false};
        }
        return absl::NotFoundError(
            absl::StrCat("training job '", job_name, "' has no rule action '", action_id, "'"));
      },
      std::move(done), std::move(fence));
}

void TrainingJobManager::StopTrainingJobWithReason(const std::string& job_name, std::string reason,
                                                   DoneCallback done,
                                                   std::optional<persistence::CheckLease> fence) {
  Mutate(
      job_name,
      [this, job_name,
       reason = std::move(reason)](const JobRecord* latest) -> absl::StatusOr<Change> {
        if (latest == nullptr) return JobNotFound(job_name);
        auto next = std::make_shared<JobRecord>(*latest);
        if (!BeginStop(*next, Now(), reason)) return Change{.changed = false};
        return Change{.next = std::move(next)};
      },
      std::move(done), std::move(fence));
}

void TrainingJobManager::ReportTrainingStatus(const v1::ReportTrainingStatusRequest& request,
                                              v1::ReportTrainingStatusResponse* response,
                                              DoneCallback done) {
  if (absl::Status valid = ValidateTrainingJobName(request.training_job_name()); !valid.ok()) {
    std::move(done)(std::move(valid));
    return;
  }
  using Event = v1::ReportTrainingStatusRequest;
  if (request.event() == Event::EVENT_UNSPECIFIED || !Event::Event_IsValid(request.event())) {
    std::move(done)(InvalidField("Event",
                                 "is required: EVENT_STARTED, EVENT_PROGRESS, EVENT_COMPLETED, "
                                 "EVENT_FAILED, EVENT_STOPPED or EVENT_CONFIG_APPLIED"));
    return;
  }
  if (request.event() == Event::EVENT_PROGRESS && !request.has_current_step()) {
    std::move(done)(InvalidField("CurrentStep", "is required with EVENT_PROGRESS"));
    return;
  }
  if (request.has_current_step() && request.current_step() < 0) {
    std::move(done)(InvalidField(
        "CurrentStep",
        absl::StrCat(request.current_step(), " is negative; training steps count from 0")));
    return;
  }
  if (request.event() == Event::EVENT_FAILED && request.failure_reason().empty()) {
    std::move(done)(InvalidField("FailureReason", "is required with EVENT_FAILED"));
    return;
  }
  if (request.event() == Event::EVENT_CONFIG_APPLIED && request.applied_config_version() < 1) {
    std::move(done)(InvalidField("AppliedConfigVersion",
                                 "is required with EVENT_CONFIG_APPLIED and counts from 1"));
    return;
  }
  auto status = std::make_shared<v1::TrainingJobStatus::Value>();
  const std::string name = request.training_job_name();
  // The agent's texts, bounded before anything is built of them: a
  // megabyte FailureReason would otherwise be copied into the record (and
  // every reply that shows it).
  v1::ReportTrainingStatusRequest bounded = request;
  bounded.set_failure_reason(CutToChars(request.failure_reason(), kMaxStatusTextChars));
  bounded.set_status_message(CutToChars(request.status_message(), kMaxStatusTextChars));
  bounded.clear_upload_backlog();  // Not kept by the server.
  Mutate(
      name,
      [this, request = std::move(bounded), status,
       name](const JobRecord* latest) -> absl::StatusOr<Change> {
        if (latest == nullptr) return JobNotFound(name);
        auto next = std::make_shared<JobRecord>(*latest);
        const absl::Time now = Now();
        const bool stopping = latest->training_job_status() == v1::TrainingJobStatus::Stopping;
        bool changed = false;
        switch (request.event()) {
          case Event::EVENT_STARTED:
            // Refused while Stopping (no change; the response says so).
            changed = MarkTrainingStarted(*next, now);
            break;
          case Event::EVENT_PROGRESS:
            changed = SetTrainingStep(*next, request.current_step());
            break;
          case Event::EVENT_STOPPED:
            if (latest->training_job_status() == v1::TrainingJobStatus::InProgress) {
              return absl::FailedPreconditionError(absl::StrCat(
                  "training job '", name,
                  "' is InProgress: no stop was ordered; report the end of a training command "
                  "that exited on its own with EVENT_COMPLETED or EVENT_FAILED"));
            }
            changed = CompleteStop(
                *next, now,
                request.status_message().empty()
                    ? absl::string_view("the agent reported that the training command exited")
                    : absl::string_view(request.status_message()));
            break;
          case Event::EVENT_CONFIG_APPLIED:
            if (request.applied_config_version() > latest->config_version()) {
              return InvalidField("AppliedConfigVersion",
                                  absl::StrCat(request.applied_config_version(),
                                               " is newer than the job's ConfigVersion ",
                                               latest->config_version()));
            }
            changed = RecordProfilerConfigApplied(*next, request.applied_config_version(), now);
            break;
          default:
            if (stopping) {
              // The command ended on its own while the stop order was on its
              // way: the process is gone, the stop is complete.
              changed = CompleteStop(
                  *next, now,
                  request.event() == Event::EVENT_COMPLETED
                      ? "the training command had exited with code 0 when the stop order "
                        "reached it"
                      : absl::StrCat(request.failure_reason(),
                                     " (before the stop order reached it)"));
            } else {
              changed = EndTraining(*next, request.event() == Event::EVENT_COMPLETED,
                                    request.failure_reason(), now);
            }
        }
        if (changed) SetTimestamp(now, next->mutable_last_modified_time());
        *status = next->training_job_status();
        if (!changed) return Change{.changed = false};
        return Change{.next = std::move(next)};
      },
      [response, status, done = std::move(done)](const absl::Status& result) mutable {
        if (result.ok()) response->set_training_job_status(*status);
        std::move(done)(result);
      });
}

std::vector<std::string> TrainingJobManager::ActiveJobNamesWithPrefix(
    const std::string& prefix) const {
  std::vector<std::string> names;
  absl::ReaderMutexLock lock(&mu_);
  for (auto it = jobs_.lower_bound(prefix);
       it != jobs_.end() && absl::StartsWith(it->first, prefix); ++it) {
    if (it->second.committed != nullptr &&
        it->second.committed->training_job_status() == v1::TrainingJobStatus::InProgress) {
      names.push_back(it->first);
    }
  }
  return names;
}

std::shared_ptr<const JobRecord> TrainingJobManager::GetJob(const std::string& name) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = jobs_.find(name);
  return it == jobs_.end() ? nullptr : it->second.committed;
}

TrainingJobManager::CommitStats TrainingJobManager::commit_stats() const {
  absl::ReaderMutexLock lock(&mu_);
  return commit_stats_;
}

size_t TrainingJobManager::job_count() const {
  absl::ReaderMutexLock lock(&mu_);
  return committed_count_;
}

TrainingJobManager::StatusCounts TrainingJobManager::CountStatuses() const {
  StatusCounts counts;
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [name, entry] : jobs_) {
    // Agents' watches are among `watches` until the job settles.
    const int64_t agents = static_cast<int64_t>(entry.agents.size());
    counts.agent_watches += agents;
    counts.client_watches +=
        std::max<int64_t>(0, static_cast<int64_t>(entry.watches.size()) - agents);
    if (entry.committed == nullptr) continue;
    const JobRecord& job = *entry.committed;
    ++counts.jobs[job.training_job_status()];
    for (const auto& rule : job.debug_rule_evaluation_statuses()) {
      ++counts.rule_evaluations[rule.rule_evaluation_status()];
    }
    for (const auto& rule : job.profiler_rule_evaluation_statuses()) {
      ++counts.rule_evaluations[rule.rule_evaluation_status()];
    }
  }
  return counts;
}

}  // namespace debugplane::core
