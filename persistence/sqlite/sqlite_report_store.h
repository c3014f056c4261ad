// ReportStore on the SQLite database of a single server, on a connection of
// its own to SqliteStorage's file (which created and migrated the table).

#ifndef DEBUGPLANE_PERSISTENCE_SQLITE_SQLITE_REPORT_STORE_H_
#define DEBUGPLANE_PERSISTENCE_SQLITE_SQLITE_REPORT_STORE_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "persistence/report_store.h"
#include "persistence/sqlite/sqlite_connection.h"

namespace debugplane::persistence {

class SqliteReportStore final : public ReportStore {
 public:
  // Opens the database at `path` (SqliteStorage::Open created and migrated
  // it). UNAVAILABLE naming the path if it cannot be opened.
  static absl::StatusOr<std::unique_ptr<SqliteReportStore>> Open(const std::string& path);

  absl::Status Put(const StoredReport& report, const std::optional<CheckLease>& fence) override;
  absl::StatusOr<std::optional<StoredReport>> Read(
      const std::string& job_name, const std::string& rule_configuration_name) override;
  absl::Status DeleteJob(const std::string& job_name, int64_t generated_before_us) override;

 private:
  explicit SqliteReportStore(std::unique_ptr<SqliteConnection> connection)
      : connection_(std::move(connection)) {}

  const std::unique_ptr<SqliteConnection> connection_;
};

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_SQLITE_SQLITE_REPORT_STORE_H_
