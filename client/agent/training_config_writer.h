// The agent's configuration writer: where a job's training writes (tensors,
// profiler output) and the files it reads its configuration from
// (debughookconfig.json and profilerconfig.json, smdebug's formats; see
// client/agent/smdebug_config_files.h), written again for every new
// configuration version.

#ifndef DEBUGPLANE_CLIENT_AGENT_TRAINING_CONFIG_WRITER_H_
#define DEBUGPLANE_CLIENT_AGENT_TRAINING_CONFIG_WRITER_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/agent/write_confinement.h"
#include "debugplane/v1/training_agent.pb.h"

namespace debugplane::client {

// The flags that place a job's files; empty: derived from the job.
struct TrainingPathFlags {
  std::string job;
  std::string tensor_dir;    // --tensor-dir
  std::string profiler_dir;  // --profiler-dir
  std::string config_dir;    // --config-dir
};

// Where a job's training writes and reads.
struct TrainingPaths {
  std::string tensor_dir;
  std::string profiler_dir;
  // profiler_dir as profilerconfig.json names it: see LowerCaseAlias.
  std::string smdebug_profiler_dir;
  std::string hook_config_path;      // debughookconfig.json
  std::string profiler_config_path;  // profilerconfig.json
  // Where the training writes its TensorBoard logs (DP_TENSORBOARD_DIR);
  // empty when the job has no TensorBoardOutputConfig.
  std::string tensorboard_dir;
};

// Decides where the tensors, the profiler output and the config files of
// the job `directive` configures go: a flag if given, else the job's local
// path (DebugHookConfig.S3OutputPath or LocalPath; ProfilerConfig's
// S3OutputPath or ProfilingParameters.LocalPath; TensorBoardOutputConfig's
// S3OutputPath or LocalPath), which `confinement` must allow, else the
// agent's state directory ($TMPDIR/debugplane-agent/<job>).
// Creates the job's own output directories and logs the choice to `log`.
// Errors (nothing is created): a job path the confinement refuses, a
// directory that cannot be made.
absl::StatusOr<TrainingPaths> ChooseTrainingPaths(const TrainingPathFlags& flags,
                                                  const WriteConfinement& confinement,
                                                  const v1::ConnectAgentResponse& directive,
                                                  std::ostream& log);

// Writes the configuration files of each new version. Thread-compatible.
class TrainingConfigWriter {
 public:
  explicit TrainingConfigWriter(TrainingPaths paths);

  const TrainingPaths& paths() const { return paths_; }

  // Writes the files for `directive`, each atomically: profilerconfig.json
  // first (what an update changes and what the training re-reads at every
  // step), with profiling on if `profiling`; then debughookconfig.json,
  // only when its text changes (never, after the first). Stops at the
  // first error.
  absl::Status Write(const v1::ConnectAgentResponse& directive, bool profiling);

 private:
  const TrainingPaths paths_;
  std::string written_hook_config_;  // What debughookconfig.json holds.
};

}  // namespace debugplane::client

#endif  // DEBUGPLANE_CLIENT_AGENT_TRAINING_CONFIG_WRITER_H_
