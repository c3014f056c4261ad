// `debugplane-agent`: runs a training command as a monitored job.
//
//   debugplane-agent run --server HOST:PORT --job NAME [flags] -- COMMAND [ARGS...]
//
// The agent connects to TrainingAgentService for the job and, before the
// command starts, writes the job's debughookconfig.json and
// profilerconfig.json (smdebug's formats) and points the command at them
// (SMDEBUG_CONFIG_FILE_PATH, SMPROFILER_CONFIG_PATH), so an
// smdebug-instrumented script is configured by the service. The command
// gets the agent's environment without DEBUGPLANE_TOKEN: the agent's key
// is not the training's (give it with --token-file to keep it off the
// command line too, which the command's processes can read in /proc). AWS
// credentials stay: the agent's uploads and the training's own S3 reads
// (its data sets) use the host's, as in a SageMaker container. Then:
// - every new configuration version (UpdateTrainingJob) is written to the
//   files atomically (smdebug re-reads profilerconfig.json at every step),
//   and the system-metrics sampler changes rate at once; once the files of a
//   version are written the agent reports it (EVENT_CONFIG_APPLIED with
//   AppliedConfigVersion: the job's ProfilerConfigAppliedTime);
// - system metrics are sampled at ProfilingIntervalInMilliseconds into the
//   SageMaker layout under the profiler output directory, while profiling
//   is enabled;
// - the command's start (reported before the command starts, which starts
//   only if the server takes it), progress (the newest step in the tensor
//   output's index) and exit are reported: exit 0 -> Completed, anything
//   else -> Failed with the code or signal;
// - a stop order (StopTrainingJob, a StopTraining rule action,
//   MaxRuntimeInSeconds) is carried out: SIGTERM to the command's process
//   group, SIGKILL after --stop-grace; then the exit is reported
//   (EVENT_STOPPED, saying how it ended), which makes the job Stopped;
// - SIGTERM or SIGINT to the agent (a service manager's stop, Ctrl-C) ends
//   the training too: the signal goes to the command's process group,
//   SIGKILL follows after --stop-grace, the exit is reported (EVENT_FAILED,
//   saying the agent was signalled and how the command ended; EVENT_STOPPED
//   if a stop order was under way) and the agent exits with 128 + the
//   signal. Before the command started, it is not started. `main` must
//   block both signals before any thread starts (client/agent/agent_signals.h);
// - when the server goes away the agent reconnects with backoff, without
//   touching the command; reports are retried until the server takes them.
//
// Connection security: --tls, --ca-cert, --client-cert and --client-key as
// the CLI has them (client/common/connection.h). A connection that fails because
// of them (a TLS/plaintext mismatch, a server certificate that does not
// verify or does not name the server, a refused handshake) is not a server
// that is down: before the command starts, the agent gives up after
// AgentOptions::security_failures_at_start such failures in a row, saying
// which server and what to change; once the command runs it logs the cause
// and keeps reconnecting, like for a server that went away.
//
// TensorBoard logs: for a job with TensorBoardOutputConfig the training
// command gets DP_TENSORBOARD_DIR and TENSORBOARD_LOGGING_DIR, the directory
// its TensorBoard writer should write into (the local S3OutputPath, else
// LocalPath, else <state directory>/tensorboard).
//
// Object storage (client/agent/output_uploads.h): when DebugHookConfig,
// ProfilerConfig or TensorBoardOutputConfig S3OutputPath is s3://, the
// training writes into a local directory (--tensor-dir / --profiler-dir,
// DebugHookConfig.LocalPath / ProfilerConfig.ProfilingParameters.LocalPath /
// TensorBoardOutputConfig.LocalPath, else the state directory) and the
// agent uploads each file to the prefix as it is complete, system metrics
// and TensorBoard event files (up to their last complete record) while
// they grow (objectstore/directory_uploader.h). A missing bucket,
// refused or half-given credentials end the agent with exit code 2 before
// the command starts; a host with no AWS credentials at all uploads nothing
// (logged); a store that is down is waited for. After the command
// exits the agent waits up to --upload-wait for the last uploads, then
// reports the end. Reports carry the upload backlog (UploadBacklog).
//
// Where it writes (client/agent/write_confinement.h): its working directory
// (unless that is "/"), --tensor-dir, --profiler-dir, --config-dir and
// every --allow-write DIR, plus its own state directory
// ($TMPDIR/debugplane-agent/<job>, for what no flag or job path places). A
// job output path outside them (DebugHookConfig.S3OutputPath or LocalPath,
// ProfilerConfig.S3OutputPath, TensorBoardOutputConfig.S3OutputPath or
// LocalPath, symbolic links resolved) is refused before
// the command starts, naming the field, the path and the flag that allows
// it; nothing is created for such a job.
//
// Exit code: the command's (128 + N if signal N ended it); 128 + N if signal
// N (SIGTERM, SIGINT) was sent to the agent; 0 if the job was
// stopped or ended before the command started; 2 for usage errors (bad
// flags, unreadable certificate files) and for a job whose output paths the
// flags do not allow; 7 if the job's configuration could not be fetched
// (server unreachable for --connect-timeout, or the connection's security
// settings do not fit the server's) or its start not reported.

// The parts (RunAgent wires them):
//   training_process.h        the child process: start, signals, stop, exit;
//   server_connection.h       the ConnectAgent stream, reports, reconnects;
//   training_config_writer.h  where the job's files go, the config files;
//   job_output_uploads.h      the uploads of s3:// output;
//   training_reports.h        progress steps and the end's report;
//   agent_flags.cc            the command line (ParseAgentCommandLine).

#ifndef DEBUGPLANE_CLIENT_AGENT_AGENT_H_
#define DEBUGPLANE_CLIENT_AGENT_AGENT_H_

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "base/clock.h"
#include "client/agent/write_confinement.h"
#include "client/common/connection.h"

namespace debugplane::client {

struct AgentOptions {
  // The server and how to reach it (--server, --tls, --ca-cert, ...).
  ConnectionOptions connection = {.user_agent = "debugplane-agent"};
  std::string job;
  std::vector<std::string> command;  // The training command; argv[0] is looked up in PATH.
  // Where the training writes tensors and profiler output, and where the
  // config files go. Empty: derived from the job (a local S3OutputPath, or
  // LocalPath), else under the state directory.
  std::string tensor_dir;
  std::string profiler_dir;
  std::string config_dir;
  // More directories the job's output paths may point into (--allow-write).
  std::vector<std::string> allow_write;
  // The training host's name in the job and the NodeId of its system
  // metrics (--node-id); empty: from the launcher's environment or the
  // machine (ResolveHostName in client/agent/host_identity.h).
  std::string node_id;
  absl::Duration stop_grace = absl::Seconds(10);
  // How often the tensor output is checked for a new step to report.
  absl::Duration progress_interval = absl::Seconds(1);
  // How long the first configuration may take to arrive.
  absl::Duration connect_timeout = absl::Seconds(60);
  // How long the final report is retried while the server is unreachable.
  absl::Duration report_timeout = absl::Minutes(5);
  // After the command exits, how long the last uploads of an s3:// job's
  // output may take before the end is reported anyway (--upload-wait).
  absl::Duration upload_wait = absl::Minutes(5);
  // How many connection failures in a row caused by the connection's
  // security settings end the agent before the command starts.
  int security_failures_at_start = 3;
  // The time of the deadlines above and of the stop's timings. Not null.
  std::shared_ptr<base::Clock> clock = base::SystemClock();
};

// How the command's end is described: client/agent/training_process.h.

// The directories the agent may write into (see the top of this file), as
// given: `working_directory` (unless it is "/" or empty), then
// --tensor-dir, --profiler-dir, --config-dir and every --allow-write, each
// with its origin for messages.
std::vector<WritableRoot> AgentWritableRoots(const AgentOptions& options,
                                             const std::string& working_directory);

// Runs the agent until the command has exited and its end is reported.
// Diagnostics go to `log`. Returns the exit code described above. Blocks;
// owns its threads and the child process. Reads the working directory
// (a writable root) when called.
int RunAgent(const AgentOptions& options, std::ostream& log);

// Parses the command line `debugplane-agent run ...` into `options`.
// Returns 0 to run, or the exit code to return at once (help: 0 after
// printing it to `out`, usage errors: 2 after printing to `err`); `run` is
// set to true only in the first case.
int ParseAgentCommandLine(int argc, const char* const* argv, AgentOptions& options, bool& run,
                          std::ostream& out, std::ostream& err);

}  // namespace debugplane::client

#endif  // DEBUGPLANE_CLIENT_AGENT_AGENT_H_
