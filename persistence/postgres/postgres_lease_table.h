// LeaseTable and ActionOutbox on PostgreSQL (the database PostgresStorage
// migrated): expiry by the database's now(), action claims with
// SELECT ... FOR UPDATE SKIP LOCKED, over a small pool of connections of
// their own (a lease renewal never waits behind the job writes).

#ifndef DEBUGPLANE_PERSISTENCE_POSTGRES_POSTGRES_LEASE_TABLE_H_
#define DEBUGPLANE_PERSISTENCE_POSTGRES_POSTGRES_LEASE_TABLE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "persistence/action_outbox.h"
#include "persistence/lease_table.h"
#include "persistence/postgres/postgres_connection.h"

namespace debugplane::persistence {

class PostgresLeaseTable final : public LeaseTable, public ActionOutbox {
 public:
  // Connects to the database of `conninfo` (already migrated by
  // PostgresStorage::Open) and prepares the statements. Errors as
  // PostgresStorage::Open's; none contains the password. `io_timeout`
  // bounds each call when the server stops answering (see
  // PostgresConnectOptions::io_timeout; connecting takes at most 2 s).
  static absl::StatusOr<std::unique_ptr<PostgresLeaseTable>> Open(
      const std::string& conninfo, absl::Duration io_timeout = absl::Seconds(3));

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
  explicit PostgresLeaseTable(std::unique_ptr<PostgresConnectionPool> pool);
  // Runs prepared statement `name` with `params` on a pooled connection
  // (once more on a new connection if a pooled one was found cut).
  absl::StatusOr<PgResult> Run(const char* name, std::span<const PgParam> params,
                               absl::string_view doing);

  const std::unique_ptr<PostgresConnectionPool> pool_;
};

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_POSTGRES_POSTGRES_LEASE_TABLE_H_
