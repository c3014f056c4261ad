#include "persistence/postgres/postgres_report_store.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "persistence/lease_fence.h"

namespace debugplane::persistence {
namespace {

constexpr char kLeaseOf[] = "dp_report_lease_of";
constexpr char kPut[] = "dp_report_put";
constexpr char kRead[] = "dp_report_read";
constexpr char kDeleteJob[] = "dp_report_delete_job";

absl::Status PrepareStatements(PostgresConnection& connection) {
  const PgStatement statements[] = {
      {kLeaseOf, "SELECT owner, token FROM job_leases WHERE job_name = $1 FOR SHARE", {kTextOid}},
      {kPut,
       "INSERT INTO profiler_reports (job_name, rule_configuration_name, generated_at_us, final, "
       "json, html) VALUES ($1, $2, $3, $4, $5, $6) "
       "ON CONFLICT (job_name, rule_configuration_name) DO UPDATE SET "
       "generated_at_us = excluded.generated_at_us, final = excluded.final, "
       "json = excluded.json, html = excluded.html",
       {kTextOid, kTextOid, kInt8Oid, kBoolOid, kByteaOid, kByteaOid}},
      {kRead,
       "SELECT generated_at_us, final, json, html FROM profiler_reports "
       "WHERE job_name = $1 AND rule_configuration_name = $2",
       {kTextOid, kTextOid}},
      {kDeleteJob,
       "DELETE FROM profiler_reports WHERE job_name = $1 AND generated_at_us < $2",
       {kTextOid, kInt8Oid}},
  };
  return PrepareAll(connection, statements);
}

PgParam Bytes(const std::string& bytes) { return {bytes.data(), static_cast<int>(bytes.size())}; }

std::string Describing(const std::string& job_name, const std::string& rule) {
  return absl::StrCat("the report of rule '", rule, "' of job '", job_name, "'");
}

}  // namespace

PostgresReportStore::PostgresReportStore(std::unique_ptr<PostgresConnectionPool> pool)
    : pool_(std::move(pool)) {}

absl::StatusOr<std::unique_ptr<PostgresReportStore>> PostgresReportStore::Open(
    const std::string& conninfo, absl::Duration io_timeout) {
  absl::StatusOr<std::unique_ptr<PostgresConnectionPool>> pool =
      OpenPostgresPool(conninfo, io_timeout, /*size=*/2, PrepareStatements);
  if (!pool.ok()) return pool.status();
  return std::unique_ptr<PostgresReportStore>(new PostgresReportStore(*std::move(pool)));
}

absl::Status PostgresReportStore::Put(const StoredReport& report,
                                      const std::optional<CheckLease>& fence) {
  auto lease = pool_->Acquire();
  if (!lease.ok()) return lease.status();
  absl::Status put = PutOn(**lease, report, fence);
  if (!put.ok() && !(**lease).broken()) {
    // End the failed transaction so that the connection can be reused.
    (void)(**lease).Exec("ROLLBACK", "rolling back a report's write");
  }
  return put;
}

absl::Status PostgresReportStore::PutOn(PostgresConnection& connection, const StoredReport& report,
                                        const std::optional<CheckLease>& fence) {
  const std::string doing =
      absl::StrCat("writing ", Describing(report.job_name, report.rule_configuration_name));
  if (auto begun = connection.Exec("BEGIN", doing); !begun.ok()) return begun.status();
  if (fence.has_value()) {
    const PgParam params[] = {Bytes(fence->job_name)};
    auto row = connection.ExecPrepared(
        kLeaseOf, params, absl::StrCat("checking the lease of job '", fence->job_name, "'"));
    if (!row.ok()) return row.status();
    std::optional<FoundLease> found;
    if (PQntuples(row->get()) > 0) {
      found = FoundLease{.owner = PgBytes(row->get(), 0, 0), .token = PgInt64(row->get(), 0, 1)};
    }
    if (absl::Status checked = CheckFence(*fence, found); !checked.ok()) return checked;
  }
  const std::string generated = PgInt8(report.generated_at_us);
  const char final_byte = report.final ? 1 : 0;
  const PgParam params[] = {Bytes(report.job_name), Bytes(report.rule_configuration_name),
                            {generated.data(), 8},  {&final_byte, 1},
                            Bytes(report.json),     Bytes(report.html)};
  if (auto put = connection.ExecPrepared(kPut, params, doing); !put.ok()) return put.status();
  auto committed = connection.Exec("COMMIT", doing);
  if (!committed.ok()) return committed.status();
  // COMMIT of a transaction that failed reports ROLLBACK, not an error.
  if (absl::string_view(PQcmdStatus(committed->get())) != "COMMIT") {
    return absl::InternalError(absl::StrCat(doing, ": the transaction was rolled back"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<StoredReport>> PostgresReportStore::Read(
    const std::string& job_name, const std::string& rule_configuration_name) {
  const PgParam params[] = {Bytes(job_name), Bytes(rule_configuration_name)};
  const std::string doing = absl::StrCat("reading ", Describing(job_name, rule_configuration_name));
  // A read changes nothing: on a connection cut since its last use, once more.
  absl::StatusOr<PgResult> result = pool_->ExecPreparedOnce(kRead, params, doing);
  if (!result.ok()) return result.status();
  const PGresult* rows = result->get();
  if (PQntuples(rows) == 0) return std::nullopt;
  return StoredReport{.job_name = job_name,
                      .rule_configuration_name = rule_configuration_name,
                      .generated_at_us = PgInt64(rows, 0, 0),
                      .final = PQgetlength(rows, 0, 1) == 1 && PQgetvalue(rows, 0, 1)[0] != 0,
                      .json = PgBytes(rows, 0, 2),
                      .html = PgBytes(rows, 0, 3)};
}

absl::Status PostgresReportStore::DeleteJob(const std::string& job_name,
                                            int64_t generated_before_us) {
  const std::string before = PgInt8(generated_before_us);
  const PgParam params[] = {Bytes(job_name), {before.data(), 8}};
  return pool_
      ->ExecPreparedOnce(kDeleteJob, params,
                         absl::StrCat("deleting the reports of job '", job_name, "'"))
      .status();
}

}  // namespace debugplane::persistence
