#include "persistence/postgres/postgres_migrations.h"

namespace debugplane::persistence {
namespace {

constexpr SchemaMigration kMigrations[] = {
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
    // v2: replicas, as SQLite's v2 (see persistence/storage.h), and each
    // server's agents per job (agent_presence, with a heartbeat). Sequence
    // numbers come from the one-row counter `change_sequence`, locked at the
    // start of every writing transaction (SELECT ... FOR UPDATE) and
    // advanced inside it: a transaction that takes numbers after another
    // waits for it to end, so the numbers are in commit order (a plain
    // sequence is not: a later number may commit first, and a reader past
    // it would miss the earlier one).
    {2, R"sql(
      ALTER TABLE training_jobs ADD COLUMN version bigint NOT NULL DEFAULT 1;
      CREATE TABLE change_sequence (
        singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
        last bigint NOT NULL
      );
      INSERT INTO change_sequence (singleton, last) VALUES (true, 0);
      CREATE TABLE job_changes (
        sequence bigint PRIMARY KEY,
        name text COLLATE "C" NOT NULL,
        version bigint NOT NULL,
        deleted boolean NOT NULL,
        creation_time_us bigint NOT NULL,
        last_modified_us bigint NOT NULL,
        status text NOT NULL,
        record bytea NOT NULL
      );
      CREATE TABLE agent_presence (
        job_name text COLLATE "C" NOT NULL,
        replica_id text NOT NULL,
        agents integer NOT NULL,
        heartbeat_us bigint NOT NULL,
        absent_since_us bigint NOT NULL,
        PRIMARY KEY (job_name, replica_id)
      );
    )sql"},
    // v3: evaluation leases, live replicas and the action outbox
    // (persistence/lease_table.h, persistence/action_outbox.h). Expiry is by
    // the database's clock (now()), so the replicas' clocks do not matter.
    {3, R"sql(
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
    // v4: ProfilerReport rules' reports, kept with the jobs so that any
    // replica serves them (persistence/report_store.h); and an index by job
    // for pruning the change feed's superseded rows (Storage::PruneChanges).
    {4, R"sql(
      CREATE TABLE profiler_reports (
        job_name text COLLATE "C" NOT NULL,
        rule_configuration_name text NOT NULL,
        generated_at_us bigint NOT NULL,
        final boolean NOT NULL,
        json bytea NOT NULL,
        html bytea NOT NULL,
        PRIMARY KEY (job_name, rule_configuration_name)
      );
      CREATE INDEX job_changes_by_name ON job_changes (name, sequence);
    )sql"},
};

}  // namespace

std::span<const SchemaMigration> PostgresMigrations() { return kMigrations; }

}  // namespace debugplane::persistence
