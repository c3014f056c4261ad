#include "persistence/postgres_migrations.h"

namespace debugplane::persistence {
namespace {

constexpr PostgresMigration kMigrations[] = {
    // v1: the job table, as SQLite's v1. Names compare and sort by bytes
    // (COLLATE "C"), as in SQLite, whatever the database's locale: listing
    // order and ForEachJob's paging do not depend on the server.
    {1, R"sql(
      CREATE TABLE training_jobs (
        name text COLLATE "C" PRIMARY KEY,
        creation_time_us bigint NOT NULL,
        last_modified_us bigint NOT NULL,
        status text NOT NULL,
        record bytea NOT NULL
      );
      CREATE INDEX training_jobs_by_creation_time ON training_jobs (creation_time_us, name);
      CREATE INDEX training_jobs_by_status ON training_jobs (status);
    )sql"},
    // v2: evaluation leases, live replicas and the action outbox
    // (persistence/lease_table.h, persistence/action_outbox.h). Expiry is by
    // the database's clock (now()), so the replicas' clocks do not matter.
    {2, R"sql(
      CREATE TABLE job_leases (
        job_name text COLLATE "C" PRIMARY KEY,
        owner text NOT NULL,
        token bigint NOT NULL,
        expires_at timestamptz NOT NULL
      );
      CREATE TABLE live_replicas (
        replica_id text PRIMARY KEY,
        expires_at timestamptz NOT NULL
      );
      CREATE TABLE rule_action_outbox (
        action_id text PRIMARY KEY,
        job_name text NOT NULL,
        claimed_by text,
        claim_token bigint NOT NULL DEFAULT 0,
        claim_expires_at timestamptz NOT NULL DEFAULT '-infinity',
        done boolean NOT NULL DEFAULT false
      );
      CREATE INDEX rule_action_outbox_open ON rule_action_outbox (action_id) WHERE NOT done;
    )sql"},
};

}  // namespace

std::span<const PostgresMigration> PostgresMigrations() { return kMigrations; }

}  // namespace debugplane::persistence
