#include "persistence/sqlite/sqlite_connection.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace debugplane::persistence {

absl::StatusOr<std::unique_ptr<SqliteConnection>> SqliteConnection::Open(const std::string& path) {
  sqlite3* db = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db == nullptr ? sqlite3_errstr(rc) : sqlite3_errmsg(db);
    sqlite3_close_v2(db);
    return absl::UnavailableError(
        absl::StrCat("sqlite database '", path, "': cannot open it: ", message));
  }
  sqlite3_busy_timeout(db, 5000);
  sqlite3_exec(db, "PRAGMA synchronous = FULL", nullptr, nullptr, nullptr);
  return std::unique_ptr<SqliteConnection>(new SqliteConnection(path, db));
}

SqliteConnection::~SqliteConnection() {
  absl::MutexLock lock(&mu_);
  sqlite3_close_v2(db_);
}

absl::Status SqliteConnection::Error(int rc, absl::string_view doing) const {
  const absl::StatusCode code = rc == SQLITE_BUSY || rc == SQLITE_LOCKED
                                    ? absl::StatusCode::kUnavailable
                                    : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat("sqlite database '", path_, "': ", doing, ": ",
                                         sqlite3_errmsg(db_), " (", sqlite3_errstr(rc), ")"));
}

absl::StatusOr<std::vector<SqliteRow>> SqliteConnection::RunLocked(
    const char* sql, const std::vector<SqliteValue>& values, absl::string_view doing) {
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql, -1, &raw, nullptr);
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> statement(raw, sqlite3_finalize);
  if (rc != SQLITE_OK) return Error(rc, doing);
  for (size_t i = 0; i < values.size() && rc == SQLITE_OK; ++i) {
    const int index = static_cast<int>(i) + 1;
    if (const auto* number = std::get_if<int64_t>(&values[i])) {
      rc = sqlite3_bind_int64(raw, index, *number);
    } else {
      const std::string& text = std::get<std::string>(values[i]);
      rc = sqlite3_bind_text64(raw, index, text.data(), text.size(), SQLITE_STATIC, SQLITE_UTF8);
    }
  }
  if (rc != SQLITE_OK) return Error(rc, doing);
  std::vector<SqliteRow> rows;
  while ((rc = sqlite3_step(raw)) == SQLITE_ROW) {
    SqliteRow& row = rows.emplace_back();
    for (int c = 0; c < sqlite3_column_count(raw); ++c) {
      if (sqlite3_column_type(raw, c) == SQLITE_INTEGER) {
        row.emplace_back(static_cast<int64_t>(sqlite3_column_int64(raw, c)));
      } else {
        // The length from SQLite, not strlen: text may hold NUL bytes.
        const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(raw, c));
        row.emplace_back(text == nullptr ? std::string()
                                         : std::string(text, sqlite3_column_bytes(raw, c)));
      }
    }
  }
  if (rc != SQLITE_DONE) return Error(rc, doing);
  return rows;
}

absl::Status SqliteConnection::InTransaction(
    absl::string_view doing, const std::function<absl::Status(const Run& run)>& body) {
  absl::MutexLock lock(&mu_);
  if (auto begun = RunLocked("BEGIN IMMEDIATE", {}, doing); !begun.ok()) return begun.status();
  const Run run = [this, doing](const char* sql, const std::vector<SqliteValue>& values) {
    mu_.AssertHeld();
    return RunLocked(sql, values, doing);
  };
  absl::Status done = body(run);
  if (done.ok()) {
    if (auto committed = RunLocked("COMMIT", {}, doing); committed.ok())
      return absl::OkStatus();
    else
      done = committed.status();
  }
  if (!sqlite3_get_autocommit(db_)) (void)RunLocked("ROLLBACK", {}, doing);
  return done;
}

int64_t SqliteInt(const SqliteRow& row, size_t column) {
  const auto* number = std::get_if<int64_t>(&row.at(column));
  return number == nullptr ? 0 : *number;
}

std::string SqliteText(const SqliteRow& row, size_t column) {
  const auto* text = std::get_if<std::string>(&row.at(column));
  return text == nullptr ? "" : *text;
}

}  // namespace debugplane::persistence
