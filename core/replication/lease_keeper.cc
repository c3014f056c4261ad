#include "core/replication/lease_keeper.h"

#include <algorithm>
#include <functional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/clock_wake.h"
#include "spdlog/spdlog.h"

namespace debugplane::core {

using persistence::CheckLease;

absl::Status ValidateLeaseKeeperOptions(const LeaseKeeperOptions& options) {
  if (options.replica_id.empty()) {
    return absl::InvalidArgumentError("--replica-id must not be empty");
  }
  if (options.lease_duration < absl::Milliseconds(30)) {
    return absl::InvalidArgumentError(absl::StrCat("--lease-duration must be at least 30ms, not ",
                                                   absl::FormatDuration(options.lease_duration)));
  }
  if (options.safety_margin <= absl::ZeroDuration() ||
      options.safety_margin >= options.lease_duration * 2 / 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--lease-safety-margin must be above 0 and below two thirds of --lease-duration (",
        absl::FormatDuration(options.lease_duration * 2 / 3), "), not ",
        absl::FormatDuration(options.safety_margin)));
  }
  if (options.clock == nullptr) return absl::InvalidArgumentError("the lease keeper needs a clock");
  return absl::OkStatus();
}

LeaseKeeper::LeaseKeeper(std::shared_ptr<persistence::LeaseTable> table, ActiveJobs active_jobs,
                         LeaseKeeperOptions options)
    : table_(std::move(table)),
      active_jobs_(std::move(active_jobs)),
      options_(std::move(options)) {}

LeaseKeeper::~LeaseKeeper() { Shutdown(); }

void LeaseKeeper::AddListener(Listener listener) { listeners_.push_back(std::move(listener)); }

void LeaseKeeper::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (started_ || stopping_) return;
    started_ = true;
  }
  // Outside mu_: the clock calls the listener under a lock of its own.
  jump_listener_ = base::WakeOnJumps(*options_.clock, mu_, wake_);
  absl::MutexLock lock(&mu_);
  thread_ = std::thread([this] { Loop(); });
  watchdog_ = std::thread([this] { Watchdog(); });
}

void LeaseKeeper::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    wake_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
  if (watchdog_.joinable()) watchdog_.join();
  options_.clock->RemoveJumpListener(jump_listener_);
  absl::MutexLock pass(&pass_mu_);
  Events events;
  std::vector<CheckLease> released;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [job, held] : held_) {
      events.lost.push_back(job);
      released.push_back(held.fence);
    }
    held_.clear();
  }
  Announce(events);
  for (const CheckLease& lease : released) {
    if (absl::Status s = table_->Release(lease); !s.ok()) {
      spdlog::warn(
          "leases: cannot release the lease of job '{}' at shutdown (it expires by "
          "itself): {}",
          lease.job_name, s.ToString());
    }
  }
  if (absl::Status s = table_->RemoveReplica(options_.replica_id); !s.ok()) {
    spdlog::warn("leases: cannot remove replica '{}' from the live replicas: {}",
                 options_.replica_id, s.ToString());
  }
}

void LeaseKeeper::Poke() {
  absl::MutexLock lock(&mu_);
  poked_ = true;
  wake_.SignalAll();
}

absl::Time LeaseKeeper::EarliestDeadlineLocked() const {
  absl::Time earliest = absl::InfiniteFuture();
  for (const auto& [job, held] : held_) earliest = std::min(earliest, held.local_deadline);
  return earliest;
}

absl::Time LeaseKeeper::NextWakeLocked() const {
  return std::min(last_pass_ + options_.lease_duration / 3, EarliestDeadlineLocked());
}

void LeaseKeeper::Watchdog() {
  while (true) {
    Events events;
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_) {
        const absl::Time next = EarliestDeadlineLocked();
        if (options_.clock->Now() >= next) break;
        const absl::Duration wait = options_.clock->RealTimeUntil(next);
        wake_.WaitWithTimeout(&mu_, std::clamp(wait, absl::Milliseconds(1), absl::Seconds(1)));
      }
      if (stopping_) return;
      ExpireLocallyLocked(events);
    }
    Announce(events);
  }
}

void LeaseKeeper::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_ && !poked_) {
        const absl::Time next = NextWakeLocked();
        const absl::Duration wait = options_.clock->RealTimeUntil(next);
        if (options_.clock->Now() >= next || wait <= absl::ZeroDuration()) break;
        wake_.WaitWithTimeout(&mu_, std::min(wait, absl::Seconds(1)));
      }
      if (stopping_) return;
      poked_ = false;
    }
    absl::Status pass = Tick();
    absl::MutexLock lock(&mu_);
    if (pass.ok()) {
      if (failed_passes_ > 0) {
        spdlog::info("leases: the database answers again after {} failed passes", failed_passes_);
      }
      failed_passes_ = 0;
    } else {
      if (failed_passes_ % 10 == 0) {
        spdlog::warn(
            "leases: pass of replica '{}' failed (leases held are kept until they "
            "expire locally): {}",
            options_.replica_id, pass.ToString());
      }
      ++failed_passes_;
    }
  }
}

void LeaseKeeper::ExpireLocallyLocked(Events& events) {
  const absl::Time now = options_.clock->Now();
  for (auto it = held_.begin(); it != held_.end();) {
    if (it->second.local_deadline <= now) {
      spdlog::warn("leases: the lease of job '{}' (token {}) expired locally: not renewed in time",
                   it->first, it->second.fence.token);
      events.lost.push_back(it->first);
      it = held_.erase(it);
    } else {
      ++it;
    }
  }
}

absl::Status LeaseKeeper::Tick() {
  absl::MutexLock pass(&pass_mu_);
  const absl::Time start = options_.clock->Now();
  Events events;
  std::vector<CheckLease> to_renew;
  {
    absl::MutexLock lock(&mu_);
    last_pass_ = start;
    ExpireLocallyLocked(events);
    for (const auto& [job, held] : held_) to_renew.push_back(held.fence);
  }
  absl::Status result = table_->Heartbeat(options_.replica_id, options_.lease_duration);
  if (result.ok() && !to_renew.empty()) {
    absl::StatusOr<std::vector<std::string>> renewed =
        table_->Renew(to_renew, options_.lease_duration);
    if (!renewed.ok()) {
      result = renewed.status();
    } else {
      const std::set<std::string> kept(renewed->begin(), renewed->end());
      absl::MutexLock lock(&mu_);
      for (const CheckLease& lease : to_renew) {
        auto it = held_.find(lease.job_name);
        if (it == held_.end() || it->second.fence.token != lease.token) continue;
        if (kept.count(lease.job_name) > 0) {
          it->second.local_deadline = start + options_.lease_duration - options_.safety_margin;
        } else {
          spdlog::warn(
              "leases: the lease of job '{}' (token {}) was refused at renewal: it "
              "expired in the database or another replica holds it",
              lease.job_name, lease.token);
          events.lost.push_back(lease.job_name);
          held_.erase(it);
        }
      }
    }
  }
  {
    // The database calls took time: what expired meanwhile goes now.
    absl::MutexLock lock(&mu_);
    ExpireLocallyLocked(events);
  }
  if (result.ok()) result = Balance(events);
  Announce(events);
  return result;
}

absl::Status LeaseKeeper::Balance(Events& events) {
  absl::StatusOr<int> live = table_->CountLiveReplicas();
  if (!live.ok()) return live.status();
  std::vector<std::string> active_list = active_jobs_();
  const std::set<std::string> active(active_list.begin(), active_list.end());
  const size_t replicas = static_cast<size_t>(std::max(1, *live));
  const size_t share = (active.size() + replicas - 1) / replicas;
  absl::StatusOr<size_t> holding = ReleaseAboveShare(active, share, replicas, events);
  if (!holding.ok()) return holding.status();
  if (*holding >= share) return absl::OkStatus();
  return AcquireUpToShare(active, share, *holding, events);
}

absl::StatusOr<size_t> LeaseKeeper::ReleaseAboveShare(const std::set<std::string>& active,
                                                      size_t share, size_t replicas,
                                                      Events& events) {
  std::vector<CheckLease> to_release;
  size_t holding = 0;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = held_.begin(); it != held_.end();) {
      if (active.count(it->first) == 0) {
        to_release.push_back(it->second.fence);
        events.lost.push_back(it->first);
        it = held_.erase(it);
      } else {
        ++it;
      }
    }
    if (held_.size() > share) {
      auto last = std::prev(held_.end());
      spdlog::info(
          "leases: replica '{}' holds {} leases, above its share of {} ({} jobs, {} "
          "replicas): giving up job '{}'",
          options_.replica_id, held_.size(), share, active.size(), replicas, last->first);
      to_release.push_back(last->second.fence);
      events.lost.push_back(last->first);
      held_.erase(last);
    }
    holding = held_.size();
  }
  // Announced before the database lets another replica take them.
  if (!to_release.empty()) {
    Announce(events);
    events = Events{};
  }
  for (const CheckLease& lease : to_release) {
    if (absl::Status s = table_->Release(lease); !s.ok()) return s;
  }
  return holding;
}

absl::Status LeaseKeeper::AcquireUpToShare(const std::set<std::string>& active, size_t share,
                                           size_t holding, Events& events) {
  absl::StatusOr<std::vector<persistence::LeaseRow>> rows = table_->List();
  if (!rows.ok()) return rows.status();
  std::set<std::string> covered;
  for (const persistence::LeaseRow& row : *rows) {
    if (row.live) covered.insert(row.job_name);
  }
  std::vector<std::string> candidates;
  for (const std::string& job : active) {
    if (covered.count(job) == 0) candidates.push_back(job);
  }
  // Each replica tries the free jobs in an order of its own, so that
  // replicas acquiring at once mostly try different rows.
  const std::hash<std::string> hash;
  std::sort(candidates.begin(), candidates.end(), [&](const std::string& a, const std::string& b) {
    return hash(options_.replica_id + a) < hash(options_.replica_id + b);
  });
  for (const std::string& job : candidates) {
    if (holding >= share) break;
    const absl::Time start = options_.clock->Now();
    absl::StatusOr<std::optional<CheckLease>> acquired =
        table_->TryAcquire(job, options_.replica_id, options_.lease_duration);
    if (!acquired.ok()) return acquired.status();
    if (!acquired->has_value()) continue;  // Another replica was faster.
    const CheckLease& lease = **acquired;
    {
      absl::MutexLock lock(&mu_);
      held_[job] = Held{.fence = lease,
                        .local_deadline = start + options_.lease_duration - options_.safety_margin};
      if (lease.token > 1) ++takeovers_;
      wake_.SignalAll();  // The watchdog may be waiting for no deadline at all.
    }
    spdlog::info("leases: replica '{}' acquired the lease of job '{}' (token {})",
                 options_.replica_id, job, lease.token);
    events.acquired.push_back(lease);
    ++holding;
  }
  return absl::OkStatus();
}

void LeaseKeeper::Announce(const Events& events) {
  if (options_.metrics != nullptr && !(events.lost.empty() && events.acquired.empty())) {
    size_t owned = 0;
    {
      absl::MutexLock lock(&mu_);
      owned = held_.size();
    }
    options_.metrics->SetOwned(static_cast<int64_t>(owned));
    for (const CheckLease& lease : events.acquired) {
      if (lease.token > 1) options_.metrics->CountTakeover();
    }
  }
  absl::MutexLock lock(&announce_mu_);
  for (const std::string& job : events.lost) {
    for (const Listener& listener : listeners_) {
      if (listener.lost) listener.lost(job);
    }
  }
  for (const CheckLease& lease : events.acquired) {
    for (const Listener& listener : listeners_) {
      if (listener.acquired) listener.acquired(lease);
    }
  }
}

std::optional<CheckLease> LeaseKeeper::FenceFor(const std::string& job_name) const {
  absl::MutexLock lock(&mu_);
  auto it = held_.find(job_name);
  if (it == held_.end() || options_.clock->Now() >= it->second.local_deadline) return std::nullopt;
  return it->second.fence;
}

std::vector<std::string> LeaseKeeper::HeldJobs() const {
  absl::MutexLock lock(&mu_);
  const absl::Time now = options_.clock->Now();
  std::vector<std::string> jobs;
  for (const auto& [job, held] : held_) {
    if (now < held.local_deadline) jobs.push_back(job);
  }
  return jobs;
}

WriteFence FenceForWrite(const LeaseKeeper* keeper, const std::string& job_name) {
  if (keeper == nullptr) return WriteFence{};
  std::optional<CheckLease> fence = keeper->FenceFor(job_name);
  return WriteFence{.allowed = fence.has_value(), .fence = std::move(fence)};
}

int64_t LeaseKeeper::takeovers() const {
  absl::MutexLock lock(&mu_);
  return takeovers_;
}

}  // namespace debugplane::core
