// A job as the dashboard's list and its `event: job` show it
// (docs/dashboard-api.md, "Jobs").

#ifndef DEBUGPLANE_SERVICE_DASHBOARD_JOB_SUMMARY_H_
#define DEBUGPLANE_SERVICE_DASHBOARD_JOB_SUMMARY_H_

#include <optional>
#include <string>

#include "absl/time/time.h"
#include "core/jobs/job_record.h"
#include "nlohmann/json.hpp"

namespace debugplane::service::dashboard {

// {"name", "status", "secondaryStatus", "creationTime", "trainingStartTime",
//  "trainingEndTime", "lastModifiedTime", "lastDataTime", "verdicts",
//  "currentStep", "profilingStatus", "configVersion",
//  "profilerConfigAppliedTime"}: times in epoch seconds or null.
// `last_data_time`: when the rules engine last read new data of the job.
nlohmann::json JobSummary(const core::JobRecord& job, std::optional<absl::Time> last_data_time);

// Epoch seconds (with fraction), or null.
nlohmann::json EpochSeconds(std::optional<absl::Time> time);

// The JSON text of `value` on one line; invalid UTF-8 (from training data)
// replaced rather than thrown.
std::string Dump(const nlohmann::json& value);

}  // namespace debugplane::service::dashboard

#endif  // DEBUGPLANE_SERVICE_DASHBOARD_JOB_SUMMARY_H_
