// LeaseTable: which server replica evaluates which job's rules.
//
// One row per job: (job_name, owner replica, fencing token, expires_at), and
// one row per live replica with the end of its heartbeat. Expiry is by the
// database's clock (PostgreSQL's now(); SQLite, one server on one machine:
// that machine's clock), so the replicas' clocks may disagree.
//
// A lease is taken only when it has no owner or has expired, and every such
// acquisition increments the job's token; the token never goes down. A
// write made for a job carries the {owner, token} it was made under
// (CheckLease in storage.h), and the storage refuses it in the same
// transaction once another replica took the lease over. Rows of released
// leases stay (expired), so the token keeps growing.

#ifndef DEBUGPLANE_PERSISTENCE_LEASE_TABLE_H_
#define DEBUGPLANE_PERSISTENCE_LEASE_TABLE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "persistence/storage.h"

namespace debugplane::persistence {

// A job's lease as the database holds it.
struct LeaseRow {
  std::string job_name;
  std::string owner;
  int64_t token = 0;
  bool live = false;  // Not expired by the database's clock.
};

// Thread-safe implementations. Every error names the database and what was
// being done; UNAVAILABLE when the database cannot be reached (a caller
// keeps what it holds only as long as its own clock allows, see
// core/replication/lease_keeper.h).
class LeaseTable {
 public:
  virtual ~LeaseTable() = default;

  // Records `replica` as live until the database's now + `ttl`.
  virtual absl::Status Heartbeat(const std::string& replica, absl::Duration ttl) = 0;
  // Forgets `replica` (a clean shutdown). Unknown replicas are ignored.
  virtual absl::Status RemoveReplica(const std::string& replica) = 0;
  // How many replicas' heartbeats have not expired.
  virtual absl::StatusOr<int> CountLiveReplicas() = 0;

  // Takes job `job_name`'s lease for `owner` until now + `duration` if it has
  // no row or its lease expired (also when `owner` held it before): the token
  // becomes the previous one + 1 (1 for a new row). Returns the new fence, or
  // nullopt when the lease is live (held by anyone, `owner` included).
  virtual absl::StatusOr<std::optional<CheckLease>> TryAcquire(const std::string& job_name,
                                                               const std::string& owner,
                                                               absl::Duration duration) = 0;
  // Extends to now + `duration` every lease of `held` that is still live
  // with that owner and token. Returns the jobs renewed; a lease missing
  // from the answer is lost (expired, or taken over).
  virtual absl::StatusOr<std::vector<std::string>> Renew(const std::vector<CheckLease>& held,
                                                         absl::Duration duration) = 0;
  // Ends `lease` now if it is still live with that owner and token (another
  // replica may take it at once); otherwise does nothing.
  virtual absl::Status Release(const CheckLease& lease) = 0;
  // Every lease row, in job-name order.
  virtual absl::StatusOr<std::vector<LeaseRow>> List() = 0;
};

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_LEASE_TABLE_H_
