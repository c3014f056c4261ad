#include "persistence/sqlite_migrations.h"

namespace debugplane::persistence {
namespace {

constexpr SqliteMigration kMigrations[] = {
    // v1: the job table. The record is opaque to storage; the other columns
    // exist so that lookups by name, listing by creation time (with the name
    // as the tie-break of a stable page order) and filtering by status can use
    // an index.
    {1, R"sql(
      CREATE TABLE training_jobs (
        name TEXT PRIMARY KEY,
        creation_time_us INTEGER NOT NULL,
        last_modified_us INTEGER NOT NULL,
        status TEXT NOT NULL,
        record BLOB NOT NULL
      );
      CREATE INDEX training_jobs_by_creation_time ON training_jobs (creation_time_us, name);
      CREATE INDEX training_jobs_by_status ON training_jobs (status);
    )sql"},
    // v2: evaluation leases, live replicas and the action outbox
    // (persistence/lease_table.h, persistence/action_outbox.h). Times are
    // microseconds since the Unix epoch by the one server's clock.
    {2, R"sql(
      CREATE TABLE job_leases (
        job_name TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        token INTEGER NOT NULL,
        expires_at_us INTEGER NOT NULL
      );
      CREATE TABLE live_replicas (
        replica_id TEXT PRIMARY KEY,
        expires_at_us INTEGER NOT NULL
      );
      CREATE TABLE rule_action_outbox (
        action_id TEXT PRIMARY KEY,
        job_name TEXT NOT NULL,
        claimed_by TEXT,
        claim_token INTEGER NOT NULL DEFAULT 0,
        claim_expires_at_us INTEGER NOT NULL DEFAULT 0,
        done INTEGER NOT NULL DEFAULT 0
      );
    )sql"},
};

}  // namespace

std::span<const SqliteMigration> SqliteMigrations() { return kMigrations; }

}  // namespace debugplane::persistence
