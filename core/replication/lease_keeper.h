// LeaseKeeper: which jobs this server replica evaluates, when several share
// one database (persistence/lease_table.h).
//
// Every lease_duration / 3 it records its heartbeat, renews the leases it
// holds, and then balances: it counts the live replicas, takes the fair
// share ceil(active jobs / live replicas), acquires leases of active jobs
// that no live lease covers until it holds its share, and gives up one lease
// per pass while it holds more (so work spreads evenly when a replica joins,
// without every job changing hands at once; when one leaves, its leases
// expire and the others take them up to their new share). Leases of jobs no
// longer active are given up.
//
// Local loss before takeover: a lease counts as held only until
//   start of its last successful renewal (or acquisition) + lease_duration
//   - safety_margin
// by this keeper's clock (monotonic in the server). The database extends it
// to its own now() + lease_duration at a moment after that start, so the
// local end comes at least safety_margin before any other replica can take
// the lease, whatever the replicas' clocks say; a replica cut off from the
// database stops its evaluations (and its fences stop being handed out)
// before another can start. The margin covers the two clocks' rate
// difference over one lease_duration and the time between FenceFor and the
// write's commit.
//
// With SQLite (one server) the same code runs: the one replica's share is
// every job.
//
// Listeners hear of each acquisition (with its fence) and each loss
// (expired locally, refused at renewal, or given up), on the keeper's
// thread (or Tick's caller), outside the keeper's lock, lost before
// acquired within a pass. A loss is announced before the lease is released
// in the database.

#ifndef DEBUGPLANE_CORE_REPLICATION_LEASE_KEEPER_H_
#define DEBUGPLANE_CORE_REPLICATION_LEASE_KEEPER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "metrics/lease_metrics.h"
#include "persistence/lease_table.h"

namespace debugplane::core {

struct LeaseKeeperOptions {
  // This replica's id, unique among the replicas (the lease owner).
  std::string replica_id;
  // How long a lease lasts after its last renewal (by the database's
  // clock); renewed every lease_duration / 3.
  absl::Duration lease_duration = absl::Seconds(10);
  // How long before the database-side expiry this replica stops counting a
  // lease as held. REQUIRES: 0 < safety_margin < lease_duration * 2 / 3
  // (else a lease would be lost locally between two renewals).
  absl::Duration safety_margin = absl::Seconds(2);
  // The local clock of the local deadlines (monotonic: base::SteadyClock();
  // a base::FakeClock in tests).
  std::shared_ptr<base::Clock> clock;
  // Where the leases owned and the takeovers (acquired with token > 1) are
  // counted; null: nowhere. Not owned; must outlive the keeper.
  metrics::LeaseMetrics* metrics = nullptr;
};

// Whether `options` are usable: INVALID_ARGUMENT naming the option if not.
absl::Status ValidateLeaseKeeperOptions(const LeaseKeeperOptions& options);

class LeaseKeeper {
 public:
  // The jobs that need an owner now (rules to evaluate, actions to carry
  // out), in any order. Called on the keeper's thread, without its lock.
  using ActiveJobs = std::function<std::vector<std::string>()>;
  struct Listener {
    std::function<void(const persistence::CheckLease& lease)> acquired;
    std::function<void(const std::string& job_name)> lost;
  };

  // REQUIRES: ValidateLeaseKeeperOptions(options).ok().
  LeaseKeeper(std::shared_ptr<persistence::LeaseTable> table, ActiveJobs active_jobs,
              LeaseKeeperOptions options);
  // Shuts down.
  ~LeaseKeeper();

  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // REQUIRES: before Start (or before the first Tick).
  void AddListener(Listener listener);

  // Starts the thread that runs Tick on schedule, and one that announces
  // local expiries when they come. Idempotent.
  void Start();
  // Stops the thread, announces every held lease lost, releases them in the
  // database (others take them at once) and removes this replica's
  // heartbeat; best effort when the database is unreachable (the leases
  // then expire). Idempotent.
  void Shutdown();

  // Asks the thread for a pass now (a job became active: it gets an owner
  // within milliseconds rather than at the next scheduled pass).
  // Thread-safe, does not block.
  void Poke();

  // One pass (heartbeat, renewal, local expiry, balance); what Start's
  // thread runs. Tests call it directly (with no thread started). Returns
  // the first database error of the pass (the pass goes on past it where it
  // can: local expiry is always checked).
  absl::Status Tick();

  // The fence of `job_name`'s lease if this replica holds it and it has not
  // expired locally; writes for the job carry it. Thread-safe.
  std::optional<persistence::CheckLease> FenceFor(const std::string& job_name) const;
  bool Holds(const std::string& job_name) const { return FenceFor(job_name).has_value(); }

  // Jobs held now (locally valid), in name order. Thread-safe.
  std::vector<std::string> HeldJobs() const;
  // For metrics (debugplane_leases_owned, debugplane_lease_takeovers_total):
  // leases held now; acquisitions of a lease some replica held before
  // (token > 1). Thread-safe.
  size_t owned() const { return HeldJobs().size(); }
  int64_t takeovers() const;
  const std::string& replica_id() const { return options_.replica_id; }

 private:
  struct Held {
    persistence::CheckLease fence;
    absl::Time local_deadline;  // By options_.clock.
  };
  struct Events {
    std::vector<std::string> lost;
    std::vector<persistence::CheckLease> acquired;
  };

  // Drops leases whose local deadline passed into `events`.
  void ExpireLocallyLocked(Events& events) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Acquires and gives up leases towards the fair share.
  absl::Status Balance(Events& events);
  // Balance's first step: gives up the leases of jobs no longer `active`,
  // then one above `share`, announcing them lost before releasing them in
  // the database. Returns how many leases are held then.
  absl::StatusOr<size_t> ReleaseAboveShare(const std::set<std::string>& active, size_t share,
                                           size_t replicas, Events& events);
  // Balance's second step: tries the active jobs no live lease covers, in
  // this replica's own order, until `holding` reaches `share`.
  absl::Status AcquireUpToShare(const std::set<std::string>& active, size_t share, size_t holding,
                                Events& events);
  void Announce(const Events& events);
  void Loop();
  // Announces local expiries as they come, even while a pass waits for a
  // database that does not answer.
  void Watchdog();
  absl::Time NextWakeLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Time EarliestDeadlineLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<persistence::LeaseTable> table_;
  const ActiveJobs active_jobs_;
  const LeaseKeeperOptions options_;
  std::vector<Listener> listeners_;  // Fixed once started.

  // Serializes passes (Tick from the thread, Shutdown's release).
  absl::Mutex pass_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // Serializes Announce (the pass and the watchdog), so that listeners hear
  // of one job's events in order.
  absl::Mutex announce_mu_;
  mutable absl::Mutex mu_;
  absl::CondVar wake_;
  std::map<std::string, Held> held_ ABSL_GUARDED_BY(mu_);
  int64_t takeovers_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_pass_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool poked_ ABSL_GUARDED_BY(mu_) = false;
  int failed_passes_ ABSL_GUARDED_BY(mu_) = 0;  // In a row, for logging.
  int64_t jump_listener_ = 0;
  std::thread thread_;
  std::thread watchdog_;
};

// Whether the rules engine may write for a job now, and under which fence:
// without a keeper (null) always, unfenced; with one only while it holds
// the job's lease, with that lease's fence.
struct WriteFence {
  bool allowed = true;
  std::optional<persistence::CheckLease> fence;
};
WriteFence FenceForWrite(const LeaseKeeper* keeper, const std::string& job_name);

// Registers `owner`'s OnLeaseAcquired(job_name) and OnLeaseLost(job_name)
// as a listener of `leases` (the components that act on the jobs whose
// lease this replica holds); a no-op when `leases` is null (one server).
// REQUIRES: as LeaseKeeper::AddListener; `owner` outlives `leases`' calls.
template <typename Owner>
void ListenForJobLeases(LeaseKeeper* leases, Owner* owner) {
  if (leases == nullptr) return;
  leases->AddListener(LeaseKeeper::Listener{
      .acquired =
          [owner](const persistence::CheckLease& lease) { owner->OnLeaseAcquired(lease.job_name); },
      .lost = [owner](const std::string& job_name) { owner->OnLeaseLost(job_name); }});
}

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_REPLICATION_LEASE_KEEPER_H_
