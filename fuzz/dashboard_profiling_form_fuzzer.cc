// libFuzzer target: the dashboard's profiling form (POST
// /api/jobs/NAME/profiling body) -> UpdateTrainingJob request
// (service/dashboard/profiling_form.h).
//
//   scripts/fuzz.sh dashboard_profiling_form_fuzzer
// Invariants: a refused form names a form member or none, and its message
// starts with that member; an accepted one either disables profiling alone
// or sets only ProfilingParameters that the server's own check of
// smdebug's configurations accepts, and passes UpdateTrainingJob's
// validation except for the interval's value (left to it on purpose).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "core/jobs/field_violations.h"
#include "core/jobs/profiling_parameters.h"
#include "core/jobs/validation.h"
#include "service/dashboard/profiling_form.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using debugplane::service::dashboard::FormError;
  const std::string body(reinterpret_cast<const char*>(data), size);
  FormError error;
  auto request = debugplane::service::dashboard::ParseProfilingForm(body, "fuzz-job", &error);
  if (!request.ok()) {
    if (!error.field.empty() && !absl::StartsWith(error.message, error.field)) std::abort();
    if (request.status().message() != error.message) std::abort();
    return 0;
  }
  const auto& config = request->profiler_config();
  if (config.has_disable_profiler()) {
    if (!config.disable_profiler() || config.has_profiling_interval_in_milliseconds() ||
        !config.profiling_parameters().empty()) {
      std::abort();
    }
  }
  for (const auto& [key, value] : config.profiling_parameters()) {
    if (!debugplane::core::CheckProfilingParameter(key, value).ok()) std::abort();
  }
  const absl::Status valid = debugplane::core::ValidateUpdateTrainingJobRequest(*request, {});
  for (const auto& violation : debugplane::core::FieldViolationsOf(valid)) {
    if (violation.field != "ProfilerConfig.ProfilingIntervalInMilliseconds") std::abort();
  }
  return 0;
}
