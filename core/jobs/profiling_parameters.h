// ProfilerConfig.ProfilingParameters: what each entry may hold.
//
// smdebug reads these from profilerconfig.json: the framework-profiling
// configurations are JSON objects in strings, e.g.
//   "DetailedProfilingConfig": "{\"StartStep\": 5, \"NumSteps\": 3}"
// A value smdebug cannot use is silently ignored by the training process
// (profiling just does not happen), so debugplane refuses it up front.

#ifndef DEBUGPLANE_CORE_JOBS_PROFILING_PARAMETERS_H_
#define DEBUGPLANE_CORE_JOBS_PROFILING_PARAMETERS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace debugplane::core {

// Checks one ProfilingParameters entry.
// - DataloaderProfilingConfig, DetailedProfilingConfig, PythonProfilingConfig
//   (and smdebug's HorovodProfilingConfig, SMDataParallelProfilingConfig):
//   a JSON object with a step range (StartStep >= 0 with optional NumSteps
//   >= 1) or a time range (StartTimeInSecSinceEpoch >= 0 with optional
//   DurationInSeconds >= 1), not both; DataloaderProfilingConfig may add
//   MetricsRegex, PythonProfilingConfig ProfilerName (cProfile or
//   Pyinstrument) and cProfileTimer (total_time, cpu or off_cpu; cProfile
//   only). A trailing comma before a closing brace is tolerated (the
//   Debugger guide's own template has one).
// - LocalPath: an absolute path. RotateMaxFileSizeInBytes,
//   RotateFileCloseIntervalInSeconds, FileOpenFailThreshold: positive
//   integers.
// Other keys pass through unchecked (smdebug ignores what it does not know).
// The JSON configurations are checked against kRequestJsonBounds
// (core/jobs/json_bounds.h) before they are parsed: a value of more than 256
// characters is refused without being parsed, one nesting arrays or objects
// more than 16 levels deep without building it.
// Returns OK or INVALID_ARGUMENT whose message says what is wrong with the
// value, quoting at most a short excerpt of it (the caller names the field).
// Thread-safe (pure).
absl::Status CheckProfilingParameter(absl::string_view key, absl::string_view value);

// `text` with every comma that is followed (after white space) by '}' or ']'
// removed, outside string literals.
std::string StripTrailingCommas(absl::string_view text);

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_JOBS_PROFILING_PARAMETERS_H_
