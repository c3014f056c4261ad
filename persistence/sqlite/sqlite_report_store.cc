#include "persistence/sqlite/sqlite_report_store.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "persistence/lease_fence.h"

namespace debugplane::persistence {

absl::StatusOr<std::unique_ptr<SqliteReportStore>> SqliteReportStore::Open(
    const std::string& path) {
  absl::StatusOr<std::unique_ptr<SqliteConnection>> connection = SqliteConnection::Open(path);
  if (!connection.ok()) return connection.status();
  return std::unique_ptr<SqliteReportStore>(new SqliteReportStore(*std::move(connection)));
}

absl::Status SqliteReportStore::Put(const StoredReport& report,
                                    const std::optional<CheckLease>& fence) {
  return connection_->InTransaction(
      absl::StrCat("writing the report of rule '", report.rule_configuration_name, "' of job '",
                   report.job_name, "'"),
      [&](const SqliteConnection::Run& run) -> absl::Status {
        if (fence.has_value()) {
          auto rows =
              run("SELECT owner, token FROM job_leases WHERE job_name = ?1", {fence->job_name});
          if (!rows.ok()) return rows.status();
          std::optional<FoundLease> found;
          if (!rows->empty()) {
            found = FoundLease{.owner = SqliteText(rows->front(), 0),
                               .token = SqliteInt(rows->front(), 1)};
          }
          if (absl::Status checked = CheckFence(*fence, found); !checked.ok()) return checked;
        }
        return run("INSERT INTO profiler_reports (job_name, rule_configuration_name, "
                   "generated_at_us, final, json, html) VALUES (?1, ?2, ?3, ?4, ?5, ?6) "
                   "ON CONFLICT (job_name, rule_configuration_name) DO UPDATE SET "
                   "generated_at_us = excluded.generated_at_us, final = excluded.final, "
                   "json = excluded.json, html = excluded.html",
                   {report.job_name, report.rule_configuration_name, report.generated_at_us,
                    int64_t{report.final ? 1 : 0}, report.json, report.html})
            .status();
      });
}

absl::StatusOr<std::optional<StoredReport>> SqliteReportStore::Read(
    const std::string& job_name, const std::string& rule_configuration_name) {
  std::optional<StoredReport> report;
  absl::Status read = connection_->InTransaction(
      absl::StrCat("reading the report of rule '", rule_configuration_name, "' of job '", job_name,
                   "'"),
      [&](const SqliteConnection::Run& run) -> absl::Status {
        auto rows =
            run("SELECT generated_at_us, final, json, html FROM profiler_reports "
                "WHERE job_name = ?1 AND rule_configuration_name = ?2",
                {job_name, rule_configuration_name});
        if (!rows.ok()) return rows.status();
        if (rows->empty()) return absl::OkStatus();
        const SqliteRow& row = rows->front();
        report = StoredReport{.job_name = job_name,
                              .rule_configuration_name = rule_configuration_name,
                              .generated_at_us = SqliteInt(row, 0),
                              .final = SqliteInt(row, 1) != 0,
                              .json = SqliteText(row, 2),
                              .html = SqliteText(row, 3)};
        return absl::OkStatus();
      });
  if (!read.ok()) return read;
  return report;
}

absl::Status SqliteReportStore::DeleteJob(const std::string& job_name,
                                          int64_t generated_before_us) {
  return connection_->InTransaction(
      absl::StrCat("deleting the reports of job '", job_name, "'"),
      [&](const SqliteConnection::Run& run) {
        return run("DELETE FROM profiler_reports WHERE job_name = ?1 AND generated_at_us < ?2",
                   {job_name, generated_before_us})
            .status();
      });
}

}  // namespace debugplane::persistence
