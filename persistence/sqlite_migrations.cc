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
};

}  // namespace

std::span<const SqliteMigration> SqliteMigrations() { return kMigrations; }

}  // namespace debugplane::persistence
