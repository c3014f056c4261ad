// The schema history of the PostgreSQL database, one step per version.
//
// The database records its version in the one-row table `schema_version`
// (absent: version 0). PostgresStorage::Open() applies the steps
// (schema_migration.h) in one transaction that holds a transaction-scoped
// advisory lock, so servers starting at once migrate one after the other.

#ifndef DEBUGPLANE_PERSISTENCE_POSTGRES_POSTGRES_MIGRATIONS_H_
#define DEBUGPLANE_PERSISTENCE_POSTGRES_POSTGRES_MIGRATIONS_H_

#include <span>

#include "persistence/schema_migration.h"

namespace debugplane::persistence {

// The schema version this build writes. Open() migrates older databases up to
// it and refuses newer ones.
inline constexpr int kPostgresSchemaVersion = 4;

// Every step, ordered (schema_migration.h); the last one's to_version is
// kPostgresSchemaVersion.
std::span<const SchemaMigration> PostgresMigrations();

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_POSTGRES_POSTGRES_MIGRATIONS_H_
