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
// smdebug lower-cases the whole of profilerconfig.json before parsing it
// (profiler_config_parser.py: json.loads(file.read().lower())), values
// included, and writes its framework output under the LocalPath it read:
//   <lower(LocalPath)>/framework/pevents/<YYYYMMDDHH>/<end_us>_<pid>-<host>_pythontimeline.json
//   <lower(LocalPath)>/framework/<framework>/... (Python and detailed profiles)
// Only LocalPath is appended to (with lower-case names), so a LocalPath that
// lower-casing leaves unchanged is enough. The agent passes the profiler
// output directory through LowerCaseAlias: the directory itself when its
// path is already lower case, else a symlink with a lower-case path (in a
// directory of the agent's own, LowerCaseAliasRoot) that points at it. The
// training process then writes through the symlink into the real directory,
// where the server reads ProfilerConfig.S3OutputPath as given.
// (debughookconfig.json is read as written: its paths need nothing.)
//
// Thread-safety: all functions are thread-compatible and keep no state; two
// concurrent WriteFileAtomically calls for the same path each leave a
// complete document (the last rename wins), and concurrent LowerCaseAlias
// calls (several agents on one host) leave one correct symlink.

#ifndef DEBUGPLANE_CLIENT_AGENT_SMDEBUG_CONFIG_FILES_H_
#define DEBUGPLANE_CLIENT_AGENT_SMDEBUG_CONFIG_FILES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
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
// smdebug lower-cases the document: `local_path` should come from
// LowerCaseAlias (see the top of this file).
std::string ProfilerConfigJson(const v1::ProfilerConfig& config, bool profiler_enabled,
                               const std::string& local_path);

// True if smdebug's lower-casing leaves `path` unchanged. Python's
// str.lower() also changes non-ASCII letters, so only paths of ASCII
// characters other than 'A'-'Z' qualify (other non-ASCII paths get an
// alias: harmless when they would have survived).
bool SurvivesLowerCasing(absl::string_view path);

// The directory under which the agent keeps its lower-case aliases:
// "<temp_dir>/debugplane-agent/smdebug-paths" when that path survives
// lower-casing, else "/tmp/debugplane-agent/smdebug-paths". `temp_dir` is
// $TMPDIR, or "" for /tmp. Does not touch the file system.
std::string LowerCaseAliasRoot(const std::string& temp_dir);

// Returns the path to write as profilerconfig.json's LocalPath for the
// profiler output directory `real_dir`, such that smdebug, which lower-cases
// it, writes into `real_dir`:
// - `real_dir` itself if SurvivesLowerCasing(real_dir) (nothing is created);
// - otherwise "<alias_root>/<16 lower-case hex digits>", a symlink to the
//   absolute form of `real_dir`. The name is a hash of that absolute path,
//   so the same directory always gets the same alias (a later run, or a
//   second agent of the same job on the host, reuses it) and different
//   directories get different ones. `real_dir` and `alias_root` are created
//   if missing (default mode, 0777 less the umask: the training process may
//   run as another user), because smdebug cannot create directories under a
//   dangling symlink. An existing alias pointing elsewhere is replaced
//   atomically (a new symlink renamed over it). Aliases are left in place
//   when the agent exits: a few bytes each, reused by the next run.
// Errors: INVALID_ARGUMENT if `alias_root` is not absolute or does not
// survive lower-casing, or `real_dir` is empty; otherwise the errno code
// (absl::ErrnoToStatus) with a message naming the path and the step, e.g.
//   "cannot create the lower-case alias /tmp/debugplane-agent/smdebug-paths/
//    0123456789abcdef -> /data/MLP-Upper/profiler: Permission denied".
absl::StatusOr<std::string> LowerCaseAlias(const std::string& real_dir,
                                           const std::string& alias_root);

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

#endif  // DEBUGPLANE_CLIENT_AGENT_SMDEBUG_CONFIG_FILES_H_
