// The schema history of the SQLite database, one step per version.
//
// A database records its version in PRAGMA user_version (0 for a new file).
// SqliteStorage::Open() applies, in order and each in its own transaction,
// every step whose to_version is above the database's version. To change the
// schema, append a step (never edit a released one: databases in the field
// already ran it) and raise kSqliteSchemaVersion to its to_version.

#ifndef DEBUGPLANE_PERSISTENCE_SQLITE_SQLITE_MIGRATIONS_H_
#define DEBUGPLANE_PERSISTENCE_SQLITE_SQLITE_MIGRATIONS_H_

#include <span>

namespace debugplane::persistence {

// The statements that take a database from version to_version - 1 to
// to_version. They contain no values from outside the program.
struct SqliteMigration {
  int to_version;
  const char* sql;  // One or more ';'-separated statements.
};

// Every step, ordered: the i-th (from 0) has to_version i + 1, and the last
// one's to_version is kSqliteSchemaVersion. Thread-safe (immutable data).
std::span<const SqliteMigration> SqliteMigrations();

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_SQLITE_SQLITE_MIGRATIONS_H_
