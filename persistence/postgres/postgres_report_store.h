// ReportStore on PostgreSQL (the database PostgresStorage migrated), over a
// small pool of connections of its own, so that a report of a few hundred
// kilobytes never holds up the jobs' writes.

#ifndef DEBUGPLANE_PERSISTENCE_POSTGRES_POSTGRES_REPORT_STORE_H_
#define DEBUGPLANE_PERSISTENCE_POSTGRES_POSTGRES_REPORT_STORE_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "persistence/postgres/postgres_connection.h"
#include "persistence/report_store.h"

namespace debugplane::persistence {

class PostgresReportStore final : public ReportStore {
 public:
  // Connects to the database of `conninfo` (already migrated by
  // PostgresStorage::Open) and prepares the statements. Errors as
  // PostgresStorage::Open's; none contains the password. `io_timeout`
  // bounds each call when the server stops answering (zero: TCP's own).
  static absl::StatusOr<std::unique_ptr<PostgresReportStore>> Open(
      const std::string& conninfo, absl::Duration io_timeout = absl::ZeroDuration());

  // One transaction: the lease row read FOR SHARE (a takeover waits for the
  // commit), then the upsert.
  absl::Status Put(const StoredReport& report, const std::optional<CheckLease>& fence) override;
  absl::StatusOr<std::optional<StoredReport>> Read(
      const std::string& job_name, const std::string& rule_configuration_name) override;
  absl::Status DeleteJob(const std::string& job_name, int64_t generated_before_us) override;

 private:
  explicit PostgresReportStore(std::unique_ptr<PostgresConnectionPool> pool);
  absl::Status PutOn(PostgresConnection& connection, const StoredReport& report,
                     const std::optional<CheckLease>& fence);

  const std::unique_ptr<PostgresConnectionPool> pool_;
};

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_POSTGRES_POSTGRES_REPORT_STORE_H_
