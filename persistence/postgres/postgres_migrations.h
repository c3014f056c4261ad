// The schema history of the PostgreSQL database, one step per version.
//
// The database records its version in the one-row table `schema_version`
// (absent: version 0). PostgresStorage::Open() applies, in one transaction
// that holds a transaction-scoped advisory lock (so servers starting at once
// migrate one after the other), every step whose to_version is above the
// database's version. To change the schema, append a step (never edit a
// released one) and raise kPostgresSchemaVersion to its to_version.

#ifndef DEBUGPLANE_PERSISTENCE_POSTGRES_POSTGRES_MIGRATIONS_H_
#define DEBUGPLANE_PERSISTENCE_POSTGRES_POSTGRES_MIGRATIONS_H_

#include <span>

namespace debugplane::persistence {

// The schema version this build writes. Open() migrates older databases up to
// it and refuses newer ones.
inline constexpr int kPostgresSchemaVersion = 4;

// The statements that take a database from version to_version - 1 to
// to_version. They contain no values from outside the program.
struct PostgresMigration {
  int to_version;
  const char* sql;  // One or more ';'-separated statements.
};

// Every step, ordered: the i-th (from 0) has to_version i + 1, and the last
// one's to_version is kPostgresSchemaVersion. Thread-safe (immutable data).
std::span<const PostgresMigration> PostgresMigrations();

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_POSTGRES_POSTGRES_MIGRATIONS_H_
