#include "client/agent/training_config_writer.h"

#include <cstdlib>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "client/agent/smdebug_config_files.h"

namespace debugplane::client {
namespace {

namespace fs = std::filesystem;

// The local directory an output URI names: an absolute path or file://
// URI; "" for object storage.
std::string LocalDirectory(const std::string& uri) {
  absl::string_view path = uri;
  if (absl::ConsumePrefix(&path, "file://")) return std::string(path);
  if (absl::StartsWith(path, "/")) return std::string(path);
  return "";
}

// A job's output path and the field it came from.
struct OutputPath {
  std::string field;
  std::string path;
};

// Where an output goes, and whether it came from the job (then it is a
// real path inside the agent's confinement).
struct OutputDirectory {
  std::string path;
  bool from_job = false;
};

// Where an output goes: the flag if given, else the job's path (which
// must be inside the confinement: the real path is returned), else the
// agent's own state directory. Creates nothing.
absl::StatusOr<OutputDirectory> PickOutputDirectory(const WriteConfinement& confinement,
                                                    const std::string& flag,
                                                    const std::vector<OutputPath>& job_paths,
                                                    const std::string& alternative,
                                                    const fs::path& fallback) {
  if (!flag.empty()) return OutputDirectory{flag};
  for (const OutputPath& job_path : job_paths) {
    if (job_path.path.empty()) continue;
    absl::StatusOr<std::string> real =
        confinement.Confine(job_path.field, job_path.path, alternative);
    if (!real.ok()) return real.status();
    return OutputDirectory{*std::move(real), /*from_job=*/true};
  }
  return OutputDirectory{fallback.string()};
}

std::vector<OutputPath> TensorPaths(const v1::DebugHookConfig& config) {
  return {{"DebugHookConfig.S3OutputPath", LocalDirectory(config.s3_output_path())},
          {"DebugHookConfig.LocalPath", config.local_path()}};
}

std::vector<OutputPath> ProfilerPaths(const v1::ProfilerConfig& config) {
  std::vector<OutputPath> paths = {
      {"ProfilerConfig.S3OutputPath", LocalDirectory(config.s3_output_path())}};
  if (auto local = config.profiling_parameters().find("LocalPath");
      local != config.profiling_parameters().end()) {
    paths.push_back({"ProfilerConfig.ProfilingParameters.LocalPath", local->second});
  }
  return paths;
}

std::vector<OutputPath> TensorBoardPaths(const v1::TensorBoardOutputConfig& config) {
  return {{"TensorBoardOutputConfig.S3OutputPath", LocalDirectory(config.s3_output_path())},
          {"TensorBoardOutputConfig.LocalPath", config.local_path()}};
}

// smdebug lower-cases profilerconfig.json, LocalPath included: the name of
// `profiler_dir` that survives it, saying so in `log`.
std::string SmdebugProfilerDirectory(const std::string& profiler_dir, const char* temp_dir,
                                     std::ostream& log) {
  absl::StatusOr<std::string> alias =
      LowerCaseAlias(profiler_dir, LowerCaseAliasRoot(temp_dir != nullptr ? temp_dir : ""));
  if (!alias.ok()) {
    log << "debugplane-agent: " << alias.status().message()
        << "; smdebug lower-cases that path, so its framework timelines will go to "
        << absl::AsciiStrToLower(profiler_dir) << ", where the server does not read them\n";
    return profiler_dir;
  }
  if (*alias != profiler_dir) {
    log << "debugplane-agent: profilerconfig.json names the profiler output " << *alias
        << " (a symlink to it that survives smdebug's lower-casing)\n";
  }
  return *std::move(alias);
}

}  // namespace

absl::StatusOr<TrainingPaths> ChooseTrainingPaths(const TrainingPathFlags& flags,
                                                  const WriteConfinement& confinement,
                                                  const v1::ConnectAgentResponse& directive,
                                                  std::ostream& log) {
  const char* tmp = std::getenv("TMPDIR");
  const fs::path state =
      fs::path(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") / "debugplane-agent" / flags.job;
  absl::StatusOr<OutputDirectory> tensors =
      PickOutputDirectory(confinement, flags.tensor_dir, TensorPaths(directive.debug_hook_config()),
                          "--tensor-dir DIR", state / "tensors");
  if (!tensors.ok()) return tensors.status();
  absl::StatusOr<OutputDirectory> profiler = PickOutputDirectory(
      confinement, flags.profiler_dir, ProfilerPaths(directive.profiler_config()),
      "--profiler-dir DIR", state / "profiler");
  if (!profiler.ok()) return profiler.status();
  // TensorBoard logs only for a job that asks for them: the variables
  // pointing the training there would change where a script writes.
  OutputDirectory tensorboard;
  if (directive.has_tensor_board_output_config()) {
    absl::StatusOr<OutputDirectory> picked = PickOutputDirectory(
        confinement, "", TensorBoardPaths(directive.tensor_board_output_config()),
        "a TensorBoardOutputConfig.LocalPath inside the allowed directories", state / "tensorboard");
    if (!picked.ok()) return picked.status();
    tensorboard = *std::move(picked);
  }
  // Made here, where no symbolic link can divert them, before the
  // training (and the sampler) write below them by name.
  for (const OutputDirectory* dir : {&*tensors, &*profiler, &tensorboard}) {
    if (!dir->from_job) continue;
    if (absl::Status made = confinement.CreateDirectories(dir->path); !made.ok()) return made;
  }
  TrainingPaths paths;
  paths.tensor_dir = std::move(tensors->path);
  paths.profiler_dir = std::move(profiler->path);
  paths.tensorboard_dir = std::move(tensorboard.path);
  const fs::path config_dir =
      flags.config_dir.empty() ? state / "config" : fs::path(flags.config_dir);
  paths.hook_config_path = (config_dir / "debughookconfig.json").string();
  paths.profiler_config_path = (config_dir / "profilerconfig.json").string();
  log << "debugplane-agent: job '" << flags.job << "': tensors in " << paths.tensor_dir
      << ", profiler output in " << paths.profiler_dir << ", configuration in "
      << config_dir.string() << "\n";
  if (!paths.tensorboard_dir.empty()) {
    log << "debugplane-agent: job '" << flags.job << "': TensorBoard logs in "
        << paths.tensorboard_dir << " (DP_TENSORBOARD_DIR, TENSORBOARD_LOGGING_DIR)\n";
  }
  paths.smdebug_profiler_dir = SmdebugProfilerDirectory(paths.profiler_dir, tmp, log);
  return paths;
}

TrainingConfigWriter::TrainingConfigWriter(TrainingPaths paths) : paths_(std::move(paths)) {}

absl::Status TrainingConfigWriter::Write(const v1::ConnectAgentResponse& directive,
                                         bool profiling) {
  absl::Status written = WriteFileAtomically(
      paths_.profiler_config_path,
      ProfilerConfigJson(directive.profiler_config(), profiling, paths_.smdebug_profiler_dir));
  if (!written.ok()) return written;
  std::string hook = DebugHookConfigJson(directive.debug_hook_config(), paths_.tensor_dir);
  if (hook == written_hook_config_) return absl::OkStatus();
  written = WriteFileAtomically(paths_.hook_config_path, hook);
  if (written.ok()) written_hook_config_ = std::move(hook);
  return written;
}

}  // namespace debugplane::client
