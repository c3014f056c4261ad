// SqliteConnection: a second connection to the database file SqliteStorage
// owns, for the tables beside the jobs (leases, the action outbox): open
// with a busy timeout, run a statement with bound values, read its rows.
//
// The file must exist and be migrated (SqliteStorage::Open does both); this
// never creates or migrates it.

#ifndef DEBUGPLANE_PERSISTENCE_SQLITE_SQLITE_CONNECTION_H_
#define DEBUGPLANE_PERSISTENCE_SQLITE_SQLITE_CONNECTION_H_

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace debugplane::persistence {

using SqliteValue = std::variant<int64_t, std::string>;
// One result row: the columns as int64 or text, in SELECT order.
using SqliteRow = std::vector<SqliteValue>;

// Thread-safe: calls are serialized by a mutex.
class SqliteConnection {
 public:
  // Opens the existing database at `path` (read-write, no create).
  // UNAVAILABLE naming the path if it cannot be opened.
  static absl::StatusOr<std::unique_ptr<SqliteConnection>> Open(const std::string& path);
  ~SqliteConnection();

  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;

  // Runs `body` inside a write transaction (BEGIN IMMEDIATE ... COMMIT;
  // ROLLBACK if `body` fails). `body` runs its statements through `run`.
  using Run = std::function<absl::StatusOr<std::vector<SqliteRow>>(
      const char* sql, const std::vector<SqliteValue>& values)>;
  absl::Status InTransaction(absl::string_view doing,
                             const std::function<absl::Status(const Run& run)>& body);

  const std::string& path() const { return path_; }

 private:
  SqliteConnection(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}
  absl::StatusOr<std::vector<SqliteRow>> RunLocked(const char* sql,
                                                   const std::vector<SqliteValue>& values,
                                                   absl::string_view doing)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Error(int rc, absl::string_view doing) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  absl::Mutex mu_;
  sqlite3* const db_ ABSL_GUARDED_BY(mu_);  // Owned; closed by the destructor.
};

// The value of column `column` of `row` as int64 (0 if it is text) or text
// ("" if it is an integer).
int64_t SqliteInt(const SqliteRow& row, size_t column);
std::string SqliteText(const SqliteRow& row, size_t column);

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_SQLITE_SQLITE_CONNECTION_H_
