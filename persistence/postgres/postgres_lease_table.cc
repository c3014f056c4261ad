#include "persistence/postgres/postgres_lease_table.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace debugplane::persistence {
namespace {

constexpr char kHeartbeat[] = "dp_lease_heartbeat";
constexpr char kRemoveReplica[] = "dp_lease_remove_replica";
constexpr char kCountLive[] = "dp_lease_count_live";
constexpr char kAcquire[] = "dp_lease_acquire";
constexpr char kRenew[] = "dp_lease_renew";
constexpr char kRelease[] = "dp_lease_release";
constexpr char kList[] = "dp_lease_list";
constexpr char kEnqueue[] = "dp_outbox_enqueue";
constexpr char kClaim[] = "dp_outbox_claim";
constexpr char kClaimState[] = "dp_outbox_claim_state";
constexpr char kClaimDue[] = "dp_outbox_claim_due";
constexpr char kComplete[] = "dp_outbox_complete";

// now() + $n microseconds.
#define DP_LATER(n) "now() + make_interval(secs => $" #n "::float8 / 1000000)"

absl::Status PrepareStatements(PostgresConnection& connection) {
  const PgStatement statements[] = {
      {kHeartbeat,
       "INSERT INTO live_replicas (replica_id, expires_at) VALUES ($1, " DP_LATER(
           2) ") "
              "ON CONFLICT (replica_id) DO UPDATE SET expires_at = excluded.expires_at",
       {kTextOid, kInt8Oid}},
      {kRemoveReplica, "DELETE FROM live_replicas WHERE replica_id = $1", {kTextOid}},
      {kCountLive, "SELECT count(*) FROM live_replicas WHERE expires_at > now()", {}},
      {kAcquire,
       "INSERT INTO job_leases (job_name, owner, token, expires_at) VALUES ($1, $2, 1, " DP_LATER(
           3) ") "
              "ON CONFLICT (job_name) DO UPDATE SET owner = excluded.owner, "
              "token = job_leases.token + 1, expires_at = excluded.expires_at "
              "WHERE job_leases.expires_at <= now() RETURNING token",
       {kTextOid, kTextOid, kInt8Oid}},
      {kRenew,
       "UPDATE job_leases SET expires_at = " DP_LATER(
           4) " WHERE job_name = $1 AND owner = $2 "
              "AND token = $3 AND expires_at > now() RETURNING job_name",
       {kTextOid, kTextOid, kInt8Oid, kInt8Oid}},
      {kRelease,
       "UPDATE job_leases SET expires_at = now() WHERE job_name = $1 AND owner = $2 "
       "AND token = $3 AND expires_at > now()",
       {kTextOid, kTextOid, kInt8Oid}},
      {kList,
       "SELECT job_name, owner, token, (expires_at > now())::int4::int8 FROM job_leases "
       "ORDER BY job_name",
       {}},
      {kEnqueue,
       "INSERT INTO rule_action_outbox (action_id, job_name) VALUES ($1, $2) "
       "ON CONFLICT (action_id) DO NOTHING",
       {kTextOid, kTextOid}},
      // Claimed unless another claimer holds it (a live claim) or is
      // claiming it in this very moment (SKIP LOCKED: this claim gives up at
      // once instead of waiting). The row exists (Enqueue).
      {kClaim,
       "WITH candidate AS (SELECT action_id FROM rule_action_outbox WHERE action_id = $1 AND NOT "
       "done "
       "  AND (claimed_by IS NULL OR claim_expires_at <= now() OR claimed_by = $3) "
       "  AND job_name = $2 "
       "  FOR UPDATE SKIP LOCKED) "
       "UPDATE rule_action_outbox o SET claimed_by = $3, claim_token = o.claim_token + 1, "
       "claim_expires_at = " DP_LATER(4) " FROM candidate WHERE o.action_id = candidate.action_id "
                                         "RETURNING o.job_name, o.claim_token",
       {kTextOid, kTextOid, kTextOid, kInt8Oid}},
      {kClaimState,
       "SELECT done::int4::int8 FROM rule_action_outbox WHERE action_id = $1",
       {kTextOid}},
      {kClaimDue,
       "WITH candidate AS (SELECT action_id FROM rule_action_outbox WHERE NOT done "
       "  AND (claimed_by IS NULL OR claim_expires_at <= now()) ORDER BY action_id LIMIT $2 "
       "  FOR UPDATE SKIP LOCKED) "
       "UPDATE rule_action_outbox o SET claimed_by = $1, claim_token = o.claim_token + 1, "
       "claim_expires_at = " DP_LATER(3) " FROM candidate WHERE o.action_id = candidate.action_id "
                                         "RETURNING o.action_id, o.job_name, o.claim_token",
       {kTextOid, kInt8Oid, kInt8Oid}},
      {kComplete,
       "UPDATE rule_action_outbox SET done = true WHERE action_id = $1 AND claimed_by = $2 "
       "AND claim_token = $3 AND NOT done RETURNING action_id",
       {kTextOid, kTextOid, kInt8Oid}},
  };
  return PrepareAll(connection, statements);
}

#undef DP_LATER

PgParam Text(const std::string& text) { return {text.data(), static_cast<int>(text.size())}; }
PgParam Int8(const std::string& bytes) { return {bytes.data(), 8}; }
std::string MicrosOf(absl::Duration duration) {
  return PgInt8(absl::ToInt64Microseconds(duration));
}

}  // namespace

PostgresLeaseTable::PostgresLeaseTable(std::unique_ptr<PostgresConnectionPool> pool)
    : pool_(std::move(pool)) {}

absl::StatusOr<std::unique_ptr<PostgresLeaseTable>> PostgresLeaseTable::Open(
    const std::string& conninfo, absl::Duration io_timeout) {
  absl::StatusOr<std::unique_ptr<PostgresConnectionPool>> pool =
      OpenPostgresPool(conninfo, io_timeout, /*size=*/2, PrepareStatements);
  if (!pool.ok()) return pool.status();
  return std::unique_ptr<PostgresLeaseTable>(new PostgresLeaseTable(*std::move(pool)));
}

absl::StatusOr<PgResult> PostgresLeaseTable::Run(const char* name, std::span<const PgParam> params,
                                                 absl::string_view doing) {
  // Every statement here is one autocommitted statement: on a connection
  // cut since its last use it never ran, so it goes once more.
  return pool_->ExecPreparedOnce(name, params, doing);
}

absl::Status PostgresLeaseTable::Heartbeat(const std::string& replica, absl::Duration ttl) {
  const std::string ttl_us = MicrosOf(ttl);
  const PgParam params[] = {Text(replica), Int8(ttl_us)};
  return Run(kHeartbeat, params, "recording a replica's heartbeat").status();
}

absl::Status PostgresLeaseTable::RemoveReplica(const std::string& replica) {
  const PgParam params[] = {Text(replica)};
  return Run(kRemoveReplica, params, "removing a replica").status();
}

absl::StatusOr<int> PostgresLeaseTable::CountLiveReplicas() {
  auto result = Run(kCountLive, {}, "counting live replicas");
  if (!result.ok()) return result.status();
  return static_cast<int>(PgInt64(result->get(), 0, 0));
}

absl::StatusOr<std::optional<CheckLease>> PostgresLeaseTable::TryAcquire(
    const std::string& job_name, const std::string& owner, absl::Duration duration) {
  const std::string duration_us = MicrosOf(duration);
  const PgParam params[] = {Text(job_name), Text(owner), Int8(duration_us)};
  auto result = Run(kAcquire, params, absl::StrCat("acquiring the lease of job '", job_name, "'"));
  if (!result.ok()) return result.status();
  if (PQntuples(result->get()) == 0) return std::optional<CheckLease>();
  return std::optional<CheckLease>(
      CheckLease{.job_name = job_name, .owner = owner, .token = PgInt64(result->get(), 0, 0)});
}

absl::StatusOr<std::vector<std::string>> PostgresLeaseTable::Renew(
    const std::vector<CheckLease>& held, absl::Duration duration) {
  const std::string duration_us = MicrosOf(duration);
  std::vector<std::string> renewed;
  for (const CheckLease& lease : held) {
    const std::string token = PgInt8(lease.token);
    const PgParam params[] = {Text(lease.job_name), Text(lease.owner), Int8(token),
                              Int8(duration_us)};
    auto result =
        Run(kRenew, params, absl::StrCat("renewing the lease of job '", lease.job_name, "'"));
    if (!result.ok()) return result.status();
    if (PQntuples(result->get()) > 0) renewed.push_back(lease.job_name);
  }
  return renewed;
}

absl::Status PostgresLeaseTable::Release(const CheckLease& lease) {
  const std::string token = PgInt8(lease.token);
  const PgParam params[] = {Text(lease.job_name), Text(lease.owner), Int8(token)};
  return Run(kRelease, params, absl::StrCat("releasing the lease of job '", lease.job_name, "'"))
      .status();
}

absl::StatusOr<std::vector<LeaseRow>> PostgresLeaseTable::List() {
  auto result = Run(kList, {}, "listing leases");
  if (!result.ok()) return result.status();
  std::vector<LeaseRow> leases;
  for (int i = 0; i < PQntuples(result->get()); ++i) {
    leases.push_back(LeaseRow{.job_name = PgBytes(result->get(), i, 0),
                              .owner = PgBytes(result->get(), i, 1),
                              .token = PgInt64(result->get(), i, 2),
                              .live = PgInt64(result->get(), i, 3) != 0});
  }
  return leases;
}

absl::Status PostgresLeaseTable::Enqueue(const std::string& action_id,
                                         const std::string& job_name) {
  const PgParam params[] = {Text(action_id), Text(job_name)};
  return Run(kEnqueue, params, absl::StrCat("adding action '", action_id, "' to the outbox"))
      .status();
}

absl::StatusOr<ClaimResult> PostgresLeaseTable::Claim(const std::string& action_id,
                                                      const std::string& job_name,
                                                      const std::string& claimer,
                                                      absl::Duration claim_for) {
  const std::string claim_us = MicrosOf(claim_for);
  const PgParam params[] = {Text(action_id), Text(job_name), Text(claimer), Int8(claim_us)};
  const std::string doing = absl::StrCat("claiming action '", action_id, "'");
  // A statement's data-modifying CTE is invisible to the rest of it: the
  // row is added first, on its own.
  if (absl::Status added = Enqueue(action_id, job_name); !added.ok()) return added;
  auto result = Run(kClaim, params, doing);
  if (!result.ok()) return result.status();
  ClaimResult claim;
  if (PQntuples(result->get()) > 0) {
    claim.outcome = ClaimOutcome::kClaimed;
    claim.claim = ActionClaim{.action_id = action_id,
                              .job_name = PgBytes(result->get(), 0, 0),
                              .claimer = claimer,
                              .claim_token = PgInt64(result->get(), 0, 1)};
    return claim;
  }
  const PgParam state_params[] = {Text(action_id)};
  auto state = Run(kClaimState, state_params, doing);
  if (!state.ok()) return state.status();
  claim.outcome = PQntuples(state->get()) > 0 && PgInt64(state->get(), 0, 0) != 0
                      ? ClaimOutcome::kDone
                      : ClaimOutcome::kClaimedByOther;
  return claim;
}

absl::StatusOr<std::vector<ActionClaim>> PostgresLeaseTable::ClaimDue(const std::string& claimer,
                                                                      int limit,
                                                                      absl::Duration claim_for) {
  const std::string limit_bytes = PgInt8(limit);
  const std::string claim_us = MicrosOf(claim_for);
  const PgParam params[] = {Text(claimer), Int8(limit_bytes), Int8(claim_us)};
  auto result = Run(kClaimDue, params, "claiming due actions");
  if (!result.ok()) return result.status();
  std::vector<ActionClaim> claims;
  for (int i = 0; i < PQntuples(result->get()); ++i) {
    claims.push_back(ActionClaim{.action_id = PgBytes(result->get(), i, 0),
                                 .job_name = PgBytes(result->get(), i, 1),
                                 .claimer = claimer,
                                 .claim_token = PgInt64(result->get(), i, 2)});
  }
  std::sort(claims.begin(), claims.end(),
            [](const ActionClaim& a, const ActionClaim& b) { return a.action_id < b.action_id; });
  return claims;
}

absl::Status PostgresLeaseTable::Complete(const ActionClaim& claim) {
  const std::string token = PgInt8(claim.claim_token);
  const PgParam params[] = {Text(claim.action_id), Text(claim.claimer), Int8(token)};
  auto result = Run(kComplete, params, absl::StrCat("completing action '", claim.action_id, "'"));
  if (!result.ok()) return result.status();
  if (PQntuples(result->get()) == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "action '", claim.action_id, "' is no longer claimed by '", claim.claimer, "' with claim ",
        claim.claim_token, ": its claim expired and another replica claimed it, or it is done"));
  }
  return absl::OkStatus();
}

}  // namespace debugplane::persistence
