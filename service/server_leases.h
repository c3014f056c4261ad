// The server's evaluation leases (core/replication/lease_keeper.h) and action outbox
// (persistence/action_outbox.h), on the server's database: which jobs this
// replica evaluates and whose actions it carries out. With SQLite (one
// server) the same parts run, and this server owns every job.

#ifndef DEBUGPLANE_SERVICE_SERVER_LEASES_H_
#define DEBUGPLANE_SERVICE_SERVER_LEASES_H_

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/replication/lease_keeper.h"
#include "core/manager/training_job_manager.h"
#include "persistence/action_outbox.h"
#include "persistence/lease_table.h"
#include "service/server_flags.h"

namespace debugplane::service {

// Whether a job needs an owning replica: a rule still to evaluate
// (InProgress) or an action still to carry out (Pending).
bool JobNeedsLease(const core::JobRecord& job);

// The names of the jobs that need an owner, following the manager's commits.
// Thread-safe.
class ActiveJobIndex {
 public:
  // REQUIRES: `manager` outlives the index. `on_new_job` runs (on the
  // committer thread; it must not block) when a job becomes active.
  ActiveJobIndex(core::TrainingJobManager* manager, std::function<void()> on_new_job);
  ~ActiveJobIndex();
  ActiveJobIndex(const ActiveJobIndex&) = delete;
  ActiveJobIndex& operator=(const ActiveJobIndex&) = delete;

  std::vector<std::string> Jobs() const;

 private:
  void Follow(const std::string& job_name, const core::JobRecord* job);

  core::TrainingJobManager* const manager_;
  const std::function<void()> on_new_job_;
  mutable absl::Mutex mu_;
  std::set<std::string> jobs_ ABSL_GUARDED_BY(mu_);
  int64_t observer_id_ = 0;
};

struct ServerLeases {
  std::shared_ptr<persistence::ActionOutbox> outbox;
  // Built, not started: the scheduler and the dispatcher add their
  // listeners first. Shut down before them.
  std::unique_ptr<core::LeaseKeeper> keeper;
  // Pokes the keeper: declared after it, so destroyed before it.
  std::unique_ptr<ActiveJobIndex> active;
};

// Opens the lease table and outbox on --database's PostgreSQL, or on the
// SQLite file `sqlite_path` (already created by the storage). Errors:
// INVALID_ARGUMENT naming the lease flag that is out of range, or the
// database's error (as the storage's, without the password).
// `lease_metrics` (null: none) counts the leases owned and the takeovers.
// REQUIRES: `manager` and `lease_metrics` outlive the result.
absl::StatusOr<ServerLeases> OpenServerLeases(const ServerConfig& config,
                                              const std::string& sqlite_path,
                                              core::TrainingJobManager* manager,
                                              metrics::LeaseMetrics* lease_metrics);

}  // namespace debugplane::service

#endif  // DEBUGPLANE_SERVICE_SERVER_LEASES_H_
