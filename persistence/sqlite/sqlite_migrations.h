// The schema history of the SQLite database, one step per version.
//
// A database records its version in PRAGMA user_version (0 for a new file).
// SqliteStorage::Open() applies the steps (schema_migration.h) in order,
// each in its own transaction.

#ifndef DEBUGPLANE_PERSISTENCE_SQLITE_SQLITE_MIGRATIONS_H_
#define DEBUGPLANE_PERSISTENCE_SQLITE_SQLITE_MIGRATIONS_H_

#include <span>

#include "persistence/schema_migration.h"

namespace debugplane::persistence {

// Every step, ordered (schema_migration.h); the last one's to_version is
// kSqliteSchemaVersion.
std::span<const SchemaMigration> SqliteMigrations();

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_SQLITE_SQLITE_MIGRATIONS_H_
