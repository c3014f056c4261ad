// ReportStore: the reports of ProfilerReport rules, kept in the database
// beside the jobs (table profiler_reports, schema v4), so that every server
// replica serves every report, whichever replica's rules engine wrote it.
//
// One row per (job, rule configuration): each write replaces the report
// before it. A write may carry the job's evaluation lease fence (storage.h's
// CheckLease): then it applies only while that lease is the job's, checked
// in the write's transaction, so a replica that lost the job writes no
// report over its new owner's.

#ifndef DEBUGPLANE_PERSISTENCE_REPORT_STORE_H_
#define DEBUGPLANE_PERSISTENCE_REPORT_STORE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "persistence/storage.h"

namespace debugplane::persistence {

struct StoredReport {
  std::string job_name;
  std::string rule_configuration_name;
  int64_t generated_at_us = 0;  // Microseconds since the Unix epoch.
  bool final = false;           // Written after training ended.
  std::string json;             // The summary (RenderProfilerReportJson).
  std::string html;             // The page (RenderProfilerReportHtml).
};

// Thread-safe.
class ReportStore {
 public:
  virtual ~ReportStore() = default;

  // Stores `report`, replacing the one of the same job and rule. With a
  // `fence`, only if the job's lease row is the fence's owner and token.
  // Errors: FAILED_PRECONDITION with kLeaseFencePayload (lease_fence.h) for a
  // stale fence, nothing written; the database's (UNAVAILABLE naming it).
  virtual absl::Status Put(const StoredReport& report, const std::optional<CheckLease>& fence) = 0;

  // The report of rule `rule_configuration_name` of job `job_name`, or
  // nullopt if none was written. Errors: the database's.
  virtual absl::StatusOr<std::optional<StoredReport>> Read(
      const std::string& job_name, const std::string& rule_configuration_name) = 0;

  // Deletes the reports of job `job_name` generated before
  // `generated_before_us` (the job was deleted then; a job created again
  // since keeps its new reports). Errors: the database's.
  virtual absl::Status DeleteJob(const std::string& job_name, int64_t generated_before_us) = 0;
};

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_REPORT_STORE_H_
