// LeaseTable and ActionOutbox on the SQLite database of a single server:
// the same rules as on PostgreSQL, with the server's own clock as the
// database's clock (one process, one machine), on a connection of their own
// to SqliteStorage's file.

#ifndef DEBUGPLANE_PERSISTENCE_SQLITE_SQLITE_LEASE_TABLE_H_
#define DEBUGPLANE_PERSISTENCE_SQLITE_SQLITE_LEASE_TABLE_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "persistence/action_outbox.h"
#include "persistence/lease_table.h"
#include "persistence/sqlite/sqlite_connection.h"

namespace debugplane::persistence {

class SqliteLeaseTable final : public LeaseTable, public ActionOutbox {
 public:
  // Opens the database at `path`, which SqliteStorage::Open created and
  // migrated. `now` is the database's clock (absl::Now; tests pass a
  // FakeClock's).
  // UNAVAILABLE naming the path if it cannot be opened.
  static absl::StatusOr<std::unique_ptr<SqliteLeaseTable>> Open(
      const std::string& path, std::function<absl::Time()> now = [] { return absl::Now(); });

  // Ends every lease and action claim and forgets every replica. For a server that just took
  // the data directory's lock: no other process can hold a lease on this
  // file, so leases left by a killed predecessor are not waited out.
  absl::Status ExpireAll();

  absl::Status Heartbeat(const std::string& replica, absl::Duration ttl) override;
  absl::Status RemoveReplica(const std::string& replica) override;
  absl::StatusOr<int> CountLiveReplicas() override;
  absl::StatusOr<std::optional<CheckLease>> TryAcquire(const std::string& job_name,
                                                       const std::string& owner,
                                                       absl::Duration duration) override;
  absl::StatusOr<std::vector<std::string>> Renew(const std::vector<CheckLease>& held,
                                                 absl::Duration duration) override;
  absl::Status Release(const CheckLease& lease) override;
  absl::StatusOr<std::vector<LeaseRow>> List() override;

  absl::Status Enqueue(const std::string& action_id, const std::string& job_name) override;
  absl::StatusOr<ClaimResult> Claim(const std::string& action_id, const std::string& job_name,
                                    const std::string& claimer, absl::Duration claim_for) override;
  absl::StatusOr<std::vector<ActionClaim>> ClaimDue(const std::string& claimer, int limit,
                                                    absl::Duration claim_for) override;
  absl::Status Complete(const ActionClaim& claim) override;

 private:
  SqliteLeaseTable(std::unique_ptr<SqliteConnection> connection, std::function<absl::Time()> now)
      : connection_(std::move(connection)), now_(std::move(now)) {}
  int64_t NowMicros() const;

  const std::unique_ptr<SqliteConnection> connection_;
  const std::function<absl::Time()> now_;
};

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_SQLITE_SQLITE_LEASE_TABLE_H_
