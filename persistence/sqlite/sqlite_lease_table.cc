#include "persistence/sqlite/sqlite_lease_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace debugplane::persistence {
namespace {

int64_t Micros(absl::Duration duration) { return absl::ToInt64Microseconds(duration); }

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteLeaseTable>> SqliteLeaseTable::Open(
    const std::string& path, std::function<absl::Time()> now) {
  absl::StatusOr<std::unique_ptr<SqliteConnection>> connection = SqliteConnection::Open(path);
  if (!connection.ok()) return connection.status();
  return std::unique_ptr<SqliteLeaseTable>(
      new SqliteLeaseTable(*std::move(connection), std::move(now)));
}

int64_t SqliteLeaseTable::NowMicros() const { return absl::ToUnixMicros(now_()); }

absl::Status SqliteLeaseTable::ExpireAll() {
  return connection_->InTransaction("ending the leases of a previous run", [&](const auto& run) {
    if (auto ended =
            run("UPDATE job_leases SET expires_at_us = ?1 WHERE expires_at_us > ?1", {NowMicros()});
        !ended.ok()) {
      return ended.status();
    }
    if (auto ended =
            run("UPDATE rule_action_outbox SET claim_expires_at_us = 0 WHERE done = 0", {});
        !ended.ok()) {
      return ended.status();
    }
    return run("DELETE FROM live_replicas", {}).status();
  });
}

absl::Status SqliteLeaseTable::Heartbeat(const std::string& replica, absl::Duration ttl) {
  const int64_t expires = NowMicros() + Micros(ttl);
  return connection_->InTransaction("recording a replica's heartbeat", [&](const auto& run) {
    return run("INSERT INTO live_replicas (replica_id, expires_at_us) VALUES (?1, ?2) "
               "ON CONFLICT (replica_id) DO UPDATE SET expires_at_us = excluded.expires_at_us",
               {replica, expires})
        .status();
  });
}

absl::Status SqliteLeaseTable::RemoveReplica(const std::string& replica) {
  return connection_->InTransaction("removing a replica", [&](const auto& run) {
    return run("DELETE FROM live_replicas WHERE replica_id = ?1", {replica}).status();
  });
}

absl::StatusOr<int> SqliteLeaseTable::CountLiveReplicas() {
  int count = 0;
  absl::Status read = connection_->InTransaction("counting live replicas", [&](const auto& run) {
    auto rows = run("SELECT count(*) FROM live_replicas WHERE expires_at_us > ?1", {NowMicros()});
    if (!rows.ok()) return rows.status();
    count = static_cast<int>(SqliteInt(rows->at(0), 0));
    return absl::OkStatus();
  });
  if (!read.ok()) return read;
  return count;
}

absl::StatusOr<std::optional<CheckLease>> SqliteLeaseTable::TryAcquire(const std::string& job_name,
                                                                       const std::string& owner,
                                                                       absl::Duration duration) {
  const int64_t now = NowMicros();
  std::optional<CheckLease> acquired;
  absl::Status done = connection_->InTransaction(
      absl::StrCat("acquiring the lease of job '", job_name, "'"), [&](const auto& run) {
        auto rows = run(
            "INSERT INTO job_leases (job_name, owner, token, expires_at_us) VALUES (?1, ?2, 1, ?3) "
            "ON CONFLICT (job_name) DO UPDATE SET owner = excluded.owner, "
            "token = job_leases.token + 1, expires_at_us = excluded.expires_at_us "
            "WHERE job_leases.expires_at_us <= ?4 RETURNING token",
            {job_name, owner, now + Micros(duration), now});
        if (!rows.ok()) return rows.status();
        if (!rows->empty()) {
          acquired = CheckLease{
              .job_name = job_name, .owner = owner, .token = SqliteInt(rows->front(), 0)};
        }
        return absl::OkStatus();
      });
  if (!done.ok()) return done;
  return acquired;
}

absl::StatusOr<std::vector<std::string>> SqliteLeaseTable::Renew(
    const std::vector<CheckLease>& held, absl::Duration duration) {
  const int64_t now = NowMicros();
  std::vector<std::string> renewed;
  absl::Status done = connection_->InTransaction("renewing leases", [&](const auto& run) {
    for (const CheckLease& lease : held) {
      auto rows =
          run("UPDATE job_leases SET expires_at_us = ?1 WHERE job_name = ?2 AND owner = ?3 AND "
              "token = ?4 AND expires_at_us > ?5 RETURNING job_name",
              {now + Micros(duration), lease.job_name, lease.owner, lease.token, now});
      if (!rows.ok()) return rows.status();
      if (!rows->empty()) renewed.push_back(lease.job_name);
    }
    return absl::OkStatus();
  });
  if (!done.ok()) return done;
  return renewed;
}

absl::Status SqliteLeaseTable::Release(const CheckLease& lease) {
  const int64_t now = NowMicros();
  return connection_->InTransaction(
      absl::StrCat("releasing the lease of job '", lease.job_name, "'"), [&](const auto& run) {
        return run("UPDATE job_leases SET expires_at_us = ?1 WHERE job_name = ?2 AND owner = ?3 "
                   "AND token = ?4 AND expires_at_us > ?1",
                   {now, lease.job_name, lease.owner, lease.token})
            .status();
      });
}

absl::StatusOr<std::vector<LeaseRow>> SqliteLeaseTable::List() {
  std::vector<LeaseRow> leases;
  absl::Status done = connection_->InTransaction("listing leases", [&](const auto& run) {
    auto rows =
        run("SELECT job_name, owner, token, expires_at_us > ?1 FROM job_leases ORDER BY job_name",
            {NowMicros()});
    if (!rows.ok()) return rows.status();
    for (const SqliteRow& row : *rows) {
      leases.push_back(LeaseRow{.job_name = SqliteText(row, 0),
                                .owner = SqliteText(row, 1),
                                .token = SqliteInt(row, 2),
                                .live = SqliteInt(row, 3) != 0});
    }
    return absl::OkStatus();
  });
  if (!done.ok()) return done;
  return leases;
}

absl::Status SqliteLeaseTable::Enqueue(const std::string& action_id, const std::string& job_name) {
  return connection_->InTransaction(
      absl::StrCat("adding action '", action_id, "' to the outbox"), [&](const auto& run) {
        return run("INSERT INTO rule_action_outbox (action_id, job_name) VALUES (?1, ?2) "
                   "ON CONFLICT (action_id) DO NOTHING",
                   {action_id, job_name})
            .status();
      });
}

absl::StatusOr<ClaimResult> SqliteLeaseTable::Claim(const std::string& action_id,
                                                    const std::string& job_name,
                                                    const std::string& claimer,
                                                    absl::Duration claim_for) {
  const int64_t now = NowMicros();
  ClaimResult result;
  absl::Status done = connection_->InTransaction(
      absl::StrCat("claiming action '", action_id, "'"), [&](const auto& run) {
        if (auto added = run("INSERT INTO rule_action_outbox (action_id, job_name) VALUES (?1, ?2) "
                             "ON CONFLICT (action_id) DO NOTHING",
                             {action_id, job_name});
            !added.ok()) {
          return added.status();
        }
        auto rows =
            run("UPDATE rule_action_outbox SET claimed_by = ?2, claim_token = claim_token + 1, "
                "claim_expires_at_us = ?3 WHERE action_id = ?1 AND done = 0 AND "
                "(claimed_by IS NULL OR claim_expires_at_us <= ?4 OR claimed_by = ?2) "
                "RETURNING job_name, claim_token",
                {action_id, claimer, now + Micros(claim_for), now});
        if (!rows.ok()) return rows.status();
        if (!rows->empty()) {
          result.outcome = ClaimOutcome::kClaimed;
          result.claim = ActionClaim{.action_id = action_id,
                                     .job_name = SqliteText(rows->front(), 0),
                                     .claimer = claimer,
                                     .claim_token = SqliteInt(rows->front(), 1)};
          return absl::OkStatus();
        }
        auto state = run("SELECT done FROM rule_action_outbox WHERE action_id = ?1", {action_id});
        if (!state.ok()) return state.status();
        result.outcome = !state->empty() && SqliteInt(state->front(), 0) != 0
                             ? ClaimOutcome::kDone
                             : ClaimOutcome::kClaimedByOther;
        return absl::OkStatus();
      });
  if (!done.ok()) return done;
  return result;
}

absl::StatusOr<std::vector<ActionClaim>> SqliteLeaseTable::ClaimDue(const std::string& claimer,
                                                                    int limit,
                                                                    absl::Duration claim_for) {
  const int64_t now = NowMicros();
  std::vector<ActionClaim> claims;
  absl::Status done = connection_->InTransaction("claiming due actions", [&](const auto& run) {
    // The write transaction serializes claimers: what SKIP LOCKED gives
    // PostgreSQL's concurrent ones.
    auto rows =
        run("UPDATE rule_action_outbox SET claimed_by = ?1, claim_token = claim_token + 1, "
            "claim_expires_at_us = ?2 WHERE action_id IN (SELECT action_id FROM rule_action_outbox "
            "WHERE done = 0 AND (claimed_by IS NULL OR claim_expires_at_us <= ?3) "
            "ORDER BY action_id LIMIT ?4) RETURNING action_id, job_name, claim_token",
            {claimer, now + Micros(claim_for), now, static_cast<int64_t>(limit)});
    if (!rows.ok()) return rows.status();
    for (const SqliteRow& row : *rows) {
      claims.push_back(ActionClaim{.action_id = SqliteText(row, 0),
                                   .job_name = SqliteText(row, 1),
                                   .claimer = claimer,
                                   .claim_token = SqliteInt(row, 2)});
    }
    return absl::OkStatus();
  });
  if (!done.ok()) return done;
  std::sort(claims.begin(), claims.end(),
            [](const ActionClaim& a, const ActionClaim& b) { return a.action_id < b.action_id; });
  return claims;
}

absl::Status SqliteLeaseTable::Complete(const ActionClaim& claim) {
  return connection_->InTransaction(
      absl::StrCat("completing action '", claim.action_id, "'"), [&](const auto& run) {
        auto rows =
            run("UPDATE rule_action_outbox SET done = 1 WHERE action_id = ?1 AND claimed_by = ?2 "
                "AND claim_token = ?3 AND done = 0 RETURNING action_id",
                {claim.action_id, claim.claimer, claim.claim_token});
        if (!rows.ok()) return rows.status();
        if (rows->empty()) {
          return absl::FailedPreconditionError(
              absl::StrCat("action '", claim.action_id, "' is no longer claimed by '",
                           claim.claimer, "' with claim ", claim.claim_token,
                           ": its claim expired and another replica claimed it, or it is done"));
        }
        return absl::OkStatus();
      });
}

}  // namespace debugplane::persistence
