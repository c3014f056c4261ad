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
};

}  // namespace

std::span<const PostgresMigration> PostgresMigrations() { return kMigrations; }

}  // namespace debugplane::persistence
