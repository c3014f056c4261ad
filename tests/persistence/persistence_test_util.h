// Helpers shared by the persistence tests.

#ifndef DEBUGPLANE_TESTS_PERSISTENCE_PERSISTENCE_TEST_UTIL_H_
#define DEBUGPLANE_TESTS_PERSISTENCE_PERSISTENCE_TEST_UTIL_H_

#include <sqlite3.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "persistence/storage.h"

namespace debugplane::persistence::testing {

// A fresh empty directory under the test temp dir, removed by the destructor.
class ScopedTempDir {
 public:
  ScopedTempDir() {
    std::string pattern =
        (std::filesystem::path(::testing::TempDir()) / "dp-persistence-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp " << pattern << " failed";
    path_ = pattern;
  }
  ~ScopedTempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A row whose every column derives from `name` and `n`.
inline JobRow MakeRow(std::string name, int64_t n) {
  JobRow row;
  row.record = "record of " + name + " #" + std::to_string(n);
  row.name = std::move(name);
  row.creation_time_us = 1'700'000'000'000'000 + n;
  row.last_modified_us = 1'700'000'000'000'000 + 2 * n;
  row.status = n % 2 == 0 ? "InProgress" : "Stopped";
  return row;
}

// A row as a tuple: comparable, and printed column by column on failure.
using RowTuple = std::tuple<std::string, int64_t, int64_t, std::string, std::string>;
inline RowTuple AsTuple(const JobRow& row) {
  return {row.name, row.creation_time_us, row.last_modified_us, row.status, row.record};
}
inline std::vector<RowTuple> AsTuples(const std::vector<JobRow>& rows) {
  std::vector<RowTuple> tuples;
  for (const JobRow& row : rows) tuples.push_back(AsTuple(row));
  return tuples;
}

// Every row of `storage`, in the order ForEachJob visits them.
inline absl::StatusOr<std::vector<JobRow>> ReadAll(Storage& storage) {
  std::vector<JobRow> rows;
  absl::Status status = storage.ForEachJob([&](const JobRow& row) {
    rows.push_back(row);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return rows;
}

// Every row of `storage` as tuples (ReadAll); a failure to read fails the
// test and gives none.
inline std::vector<RowTuple> Contents(Storage& storage) {
  absl::StatusOr<std::vector<JobRow>> rows = ReadAll(storage);
  EXPECT_TRUE(rows.ok()) << rows.status();
  return rows.ok() ? AsTuples(*rows) : std::vector<RowTuple>{};
}

// A plain sqlite3 connection to set up or inspect a database behind
// SqliteStorage's back.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    sqlite3* raw = nullptr;
    const int rc =
        sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    db_.reset(raw);
    if (rc != SQLITE_OK) ADD_FAILURE() << "opening " << path << ": " << sqlite3_errmsg(db());
    sqlite3_busy_timeout(db(), 10'000);
  }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  // Runs `sql`, failing the test on error.
  void Exec(const std::string& sql) {
    char* error = nullptr;
    if (sqlite3_exec(db(), sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
      ADD_FAILURE() << sql << ": " << (error != nullptr ? error : "?");
    }
    sqlite3_free(error);
  }

  // The first column of each row of `sql`, as text.
  std::vector<std::string> Column(const std::string& sql) {
    std::vector<std::string> values;
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db(), sql.c_str(), -1, &statement, nullptr) != SQLITE_OK) {
      ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db());
      return values;
    }
    int rc;
    while ((rc = sqlite3_step(statement)) == SQLITE_ROW) {
      const unsigned char* text = sqlite3_column_text(statement, 0);
      values.emplace_back(text != nullptr ? reinterpret_cast<const char*>(text) : "");
    }
    if (rc != SQLITE_DONE) ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db());
    sqlite3_finalize(statement);
    return values;
  }

  // The single value `sql` returns ("" if none).
  std::string Value(const std::string& sql) {
    std::vector<std::string> values = Column(sql);
    return values.empty() ? "" : values.front();
  }

 private:
  struct Closer {
    void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
  };
  sqlite3* db() { return db_.get(); }

  std::unique_ptr<sqlite3, Closer> db_;
};

}  // namespace debugplane::persistence::testing

#endif  // DEBUGPLANE_TESTS_PERSISTENCE_PERSISTENCE_TEST_UTIL_H_
