#include "persistence/sqlite/sqlite_migrations.h"

namespace debugplane::persistence {
namespace {

constexpr SchemaMigration kMigrations[] = {
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
    // v2: replicas (see persistence/storage.h). Row versions for optimistic
    // concurrency (rows already there count as written once); the change
    // feed: every write gets the next number of the one-row counter
    // `change_sequence` inside its transaction, and its row (or a
    // tombstone) is kept in `job_changes` under that number. Writes before
    // v2 are not in the feed: readers load the table first.
    {2, R"sql(
      ALTER TABLE training_jobs ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
      CREATE TABLE change_sequence (
        singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
        last INTEGER NOT NULL
      );
      INSERT INTO change_sequence (singleton, last) VALUES (1, 0);
      CREATE TABLE job_changes (
        sequence INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        version INTEGER NOT NULL,
        deleted INTEGER NOT NULL,
        creation_time_us INTEGER NOT NULL,
        last_modified_us INTEGER NOT NULL,
        status TEXT NOT NULL,
        record BLOB NOT NULL
      );
    )sql"},
    // v3: evaluation leases, live replicas and the action outbox
    // (persistence/lease_table.h, persistence/action_outbox.h). Times are
    // microseconds since the Unix epoch by the one server's clock.
    {3, R"sql(
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
    // v4: ProfilerReport rules' reports, kept with the jobs so that any
    // replica serves them (persistence/report_store.h); and an index by job
    // for pruning the change feed's superseded rows (Storage::PruneChanges).
    {4, R"sql(
      CREATE TABLE profiler_reports (
        job_name TEXT NOT NULL,
        rule_configuration_name TEXT NOT NULL,
        generated_at_us INTEGER NOT NULL,
        final INTEGER NOT NULL,
        json BLOB NOT NULL,
        html BLOB NOT NULL,
        PRIMARY KEY (job_name, rule_configuration_name)
      );
      CREATE INDEX job_changes_by_name ON job_changes (name, sequence);
    )sql"},
};

}  // namespace

std::span<const SchemaMigration> SqliteMigrations() { return kMigrations; }

}  // namespace debugplane::persistence
