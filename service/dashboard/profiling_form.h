// The dashboard's profiling controls (POST /api/jobs/NAME/profiling,
// docs/dashboard-api.md) -> UpdateTrainingJob's ProfilerConfigForUpdate, and
// UpdateTrainingJob's validation errors back to the form's member names, so
// the page shows each next to its field.

#ifndef DEBUGPLANE_SERVICE_DASHBOARD_PROFILING_FORM_H_
#define DEBUGPLANE_SERVICE_DASHBOARD_PROFILING_FORM_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/jobs/field_violations.h"
#include "debugplane/v1/training_job.pb.h"

namespace debugplane::service::dashboard {

// A form error: the form's member (e.g. "detailedProfiling.numSteps") and
// what is wrong with it.
struct FormError {
  std::string field;
  std::string message;
};

// Parses the form `body` (a JSON object of at most 4096 characters) into an
// UpdateTrainingJobRequest for `job_name`:
//   profilingEnabled false        -> DisableProfiler (alone);
//   monitoringIntervalMillis N    -> ProfilingIntervalInMilliseconds;
//   detailedProfiling / dataloaderProfiling / pythonProfiling objects
//     {startStep, numSteps} or {startTimeSeconds, durationSeconds}
//     (+ metricsRegex; + profilerName, cprofileTimer)
//                                 -> ProfilingParameters' DetailedProfilingConfig,
//                                    DataloaderProfilingConfig, PythonProfilingConfig;
//   null or absent members change nothing.
// The value checks UpdateTrainingJob makes (the interval's allowed values)
// are left to it. On error returns INVALID_ARGUMENT and sets `*error` (field
// and message; values are quoted short). Thread-safe (pure).
absl::StatusOr<v1::UpdateTrainingJobRequest> ParseProfilingForm(absl::string_view body,
                                                                const std::string& job_name,
                                                                FormError* error);

// The form member an UpdateTrainingJob violation is about, e.g.
// "ProfilerConfig.ProfilingIntervalInMilliseconds" -> "monitoringIntervalMillis",
// "ProfilerConfig.ProfilingParameters.DetailedProfilingConfig" with "NumSteps
// must ..." -> "detailedProfiling.numSteps"; "" if the form has none.
std::string FormFieldOf(const core::FieldViolation& violation);

}  // namespace debugplane::service::dashboard

#endif  // DEBUGPLANE_SERVICE_DASHBOARD_PROFILING_FORM_H_
