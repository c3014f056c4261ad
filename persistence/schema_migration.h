// SchemaMigration: one step of a database's schema history (the SQLite and
// PostgreSQL histories: sqlite/sqlite_migrations.h,
// postgres/postgres_migrations.h).
//
// A history is an ordered list of steps: the i-th (from 0) has to_version
// i + 1, and the last one's to_version is the schema version the build
// writes. Opening a database applies every step whose to_version is above
// the database's version. To change a schema, append a step (never edit a
// released one: databases in the field already ran it) and raise the
// schema version to its to_version. Histories are immutable data
// (thread-safe).

#ifndef DEBUGPLANE_PERSISTENCE_SCHEMA_MIGRATION_H_
#define DEBUGPLANE_PERSISTENCE_SCHEMA_MIGRATION_H_

namespace debugplane::persistence {

// The statements that take a database from version to_version - 1 to
// to_version. They contain no values from outside the program.
struct SchemaMigration {
  int to_version;
  const char* sql;  // One or more ';'-separated statements.
};

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_SCHEMA_MIGRATION_H_
