// The agent's command line: flags -> AgentOptions (client/agent/agent.h).

#include "client/agent/agent.h"

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "client/common/connection.h"

namespace debugplane::client {

std::vector<WritableRoot> AgentWritableRoots(const AgentOptions& options,
                                             const std::string& working_directory) {
  std::vector<WritableRoot> roots;
  // "/" would allow everything: an agent started there (a service manager's
  // default) gets no permission from it.
  if (!working_directory.empty() && working_directory != "/") {
    roots.push_back({working_directory, "the working directory"});
  }
  if (!options.tensor_dir.empty()) roots.push_back({options.tensor_dir, "--tensor-dir"});
  if (!options.profiler_dir.empty()) roots.push_back({options.profiler_dir, "--profiler-dir"});
  if (!options.config_dir.empty()) roots.push_back({options.config_dir, "--config-dir"});
  for (const std::string& dir : options.allow_write) roots.push_back({dir, "--allow-write"});
  return roots;
}

namespace {

// --tensor-dir, --profiler-dir, --config-dir and --allow-write: where the
// job's files go and may go.
void AddPlacementFlags(CLI::App* run_command, AgentOptions& options) {
  run_command->add_option("--tensor-dir", options.tensor_dir,
                          "Where the training writes tensors (default: the job's local "
                          "DebugHookConfig.S3OutputPath or LocalPath)");
  run_command->add_option("--profiler-dir", options.profiler_dir,
                          "Where profiler output goes (default: the job's local "
                          "ProfilerConfig.S3OutputPath)");
  run_command->add_option("--config-dir", options.config_dir,
                          "Where debughookconfig.json and profilerconfig.json are written");
  run_command
      ->add_option("--allow-write", options.allow_write,
                   "A directory the job's output paths may point into (repeatable); also allowed: "
                   "the working directory (unless /), --tensor-dir, --profiler-dir, --config-dir")
      ->type_name("DIR")
      ->expected(1)
      ->allow_extra_args(false)  // Else a following "--" would end its list, not the flags.
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

// The durations the command line gives in seconds.
struct SecondsFlags {
  double stop_grace = 0;
  double upload_wait = 0;
};

void AddDurationFlags(CLI::App* run_command, SecondsFlags& seconds) {
  run_command->add_option("--stop-grace", seconds.stop_grace, "Seconds between SIGTERM and SIGKILL")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  run_command
      ->add_option("--upload-wait", seconds.upload_wait,
                   "Seconds the agent waits, after the command has exited, for the last files of "
                   "an s3:// job's output to be uploaded before it reports the end")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
}

}  // namespace

int ParseAgentCommandLine(int argc, const char* const* argv, AgentOptions& options, bool& run,
                          std::ostream& out, std::ostream& err) {
  run = false;
  CLI::App app{"debugplane-agent: runs a training command as a monitored debugplane job"};
  app.require_subcommand(1);
  CLI::App* run_command = app.add_subcommand(
      "run", "Run COMMAND for job NAME: debugplane-agent run --job NAME -- COMMAND [ARGS...]");
  run_command
      ->add_option("--server", options.connection.server, "debugplane-server address (HOST:PORT)")
      ->envname("DEBUGPLANE_SERVER")
      ->capture_default_str();
  AddTlsFlags(*run_command, options.connection);
  AddTokenFlags(*run_command, options.connection);
  run_command->add_option("--job", options.job, "The training job (created beforehand)")
      ->required();
  AddPlacementFlags(run_command, options);
  run_command->add_option("--node-id", options.node_id,
                          "This training host's name in the job (unique per job; the NodeId of "
                          "its system metrics). Default: SM_CURRENT_HOST, else algo-<N+1> from "
                          "GROUP_RANK or NODE_RANK, else the machine's name");
  SecondsFlags seconds{.stop_grace = absl::ToDoubleSeconds(options.stop_grace),
                       .upload_wait = absl::ToDoubleSeconds(options.upload_wait)};
  AddDurationFlags(run_command, seconds);
  run_command->add_option("command", options.command, "The training command and its arguments")
      ->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    out << app.help();
    return 0;
  } catch (const CLI::ParseError& error) {
    err << "debugplane-agent: " << error.what() << "\n";
    return 2;
  }
  options.stop_grace = absl::Seconds(seconds.stop_grace);
  options.upload_wait = absl::Seconds(seconds.upload_wait);
  run = true;
  return 0;
}

}  // namespace debugplane::client
