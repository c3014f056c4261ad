// The two config files the smdebug library reads inside a training process
// (format: docs/smdebug-format.md, section 3), and the atomic
// file replacement that lets a running process pick up a profiling update.
//
// The host agent writes
//   $SMDEBUG_CONFIG_FILE_PATH (debughookconfig.json)  from DebugHookConfigJson
//   $SMPROFILER_CONFIG_PATH   (profilerconfig.json)   from ProfilerConfigJson
// with WriteFileAtomically before it starts the training command, and
// rewrites profilerconfig.json the same way on every accepted
// UpdateTrainingJob: smdebug re-reads that file at every step, so it must
// never observe a half-written document.
//
// Thread-safety: all functions are thread-compatible and keep no state; two
// concurrent WriteFileAtomically calls for the same path each leave a
// complete document (the last rename wins).

#ifndef DEBUGPLANE_CLIENT_SMDEBUG_CONFIG_FILES_H_
#define DEBUGPLANE_CLIENT_SMDEBUG_CONFIG_FILES_H_

#include <string>

#include "absl/status/status.h"
#include "debugplane/v1/training_job.pb.h"

namespace debugplane::client {

// The profiling interval smdebug uses when the API config leaves it unset.
inline constexpr int64_t kDefaultProfilingIntervalMillis = 500;

// Returns the debughookconfig.json document for `config`:
//
//   {
//     "LocalPath": "<local_path>",
//     "HookParameters": {"<key>": "<value>", ...},
//     "CollectionConfigurations": [
//       {"CollectionName": "<name>", "CollectionParameters": {...}}, ...
//     ]
//   }
//
// `local_path` is where the training process writes tensors on this host
// (the agent uploads/relays from there); it replaces config.local_path(),
// which is only used when `local_path` is empty. S3OutputPath is not
// written: the training process never talks to the output location itself.
// All three keys are always present (empty object/array when the config has
// none), because smdebug treats a missing key and an empty one alike.
// Parameter values stay strings, exactly as in the API; map keys are sorted
// and collections keep their API order, so the output is deterministic.
// The result is pretty-printed (2-space indent) and ends with '\n'.
std::string DebugHookConfigJson(const v1::DebugHookConfig& config, const std::string& local_path);

// Returns the profilerconfig.json document.
//
// Disabled (profiler_enabled is false, or config.disable_profiler() is true):
// exactly
//   {
//     "ProfilingParameters": {
//       "ProfilerEnabled": false
//     }
//   }
// (no other keys: smdebug turns system monitoring and framework profiling
// off on ProfilerEnabled=false alone, and leaving the old parameters out
// means a later re-enable cannot resurrect stale StartStep values).
//
// Enabled: {"ProfilingParameters": {...}} holding, in this order,
//   "ProfilerEnabled": true,
//   "LocalPath": `local_path` (if empty: the ProfilingParameters["LocalPath"]
//                of the config, if any; otherwise the key is omitted),
//   "ProfilingIntervalInMilliseconds": <number> (the typed field; if unset,
//                a parseable ProfilingParameters entry of that name; else 500),
// then every other ProfilingParameters entry with its key, sorted by key:
//   - RotateMaxFileSizeInBytes, RotateFileCloseIntervalInSeconds and
//     FileOpenFailThreshold become JSON numbers (integers when the string is
//     an integer, else a double); a value that is not a number stays a
//     string so nothing the user sent is lost silently (smdebug then falls
//     back to its default for it);
//   - all other values (DataloaderProfilingConfig, DetailedProfilingConfig,
//     PythonProfilingConfig, ...) stay JSON strings, as in the doc:
//     "DetailedProfilingConfig": "{\"StartStep\": 5, \"NumSteps\": 3}".
// A ProfilingParameters entry named ProfilerEnabled is ignored (the argument
// decides). Pretty-printed (2-space indent), ends with '\n'.
std::string ProfilerConfigJson(const v1::ProfilerConfig& config, bool profiler_enabled,
                               const std::string& local_path);

// Replaces the file at `path` with `contents` so that a concurrent reader
// only ever sees the complete old or the complete new contents:
// creates missing parent directories (mode 0755), writes a temporary file in
// the same directory (".<name>.tmp.XXXXXX", mode 0644), fsyncs it, renames
// it over `path` and fsyncs the directory (so the rename survives a crash).
//
// Returns OK on success. Errors (the errno code mapped by
// absl::ErrnoToStatus, e.g. PermissionDenied, NotFound, ResourceExhausted)
// carry a message naming the failing step, the path and strerror text, e.g.
//   "cannot create temporary file for /ro/x.json in /ro: Permission denied".
// On error no temporary file is left behind and `path` is untouched, except
// when only the final directory fsync fails: then `path` already holds the
// new contents, which might not survive a crash.
// REQUIRES: `path` names a file, not a directory, and is not empty.
absl::Status WriteFileAtomically(const std::string& path, const std::string& contents);

}  // namespace debugplane::client

#endif  // DEBUGPLANE_CLIENT_SMDEBUG_CONFIG_FILES_H_
