#include "client/agent/agent.h"

#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <cstdint>
#include <filesystem>
#include <system_error>
#include <limits>
#include <memory>
#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/agent/agent_signals.h"
#include "client/agent/clock_wait.h"
#include "client/agent/host_identity.h"
#include "client/agent/job_output_uploads.h"
#include "client/agent/profiler_module.h"
#include "client/agent/server_connection.h"
#include "client/agent/system_metrics.h"
#include "client/agent/training_config_writer.h"
#include "client/agent/training_process.h"
#include "client/agent/training_reports.h"
#include "client/common/connection.h"
#include "debugplane/v1/training_agent.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "objectstore/directory_uploader.h"

extern char** environ;

namespace debugplane::client {
namespace {

namespace fs = std::filesystem;
using Event = v1::ReportTrainingStatusRequest;

// How long the report of an applied configuration version is retried (the
// next directive brings another try).
constexpr absl::Duration kConfigAppliedPatience = absl::Seconds(2);
// The sampling interval when the job names none.
constexpr int64_t kDefaultProfilingIntervalMs = 500;

bool ProfilingEnabled(const v1::ConnectAgentResponse& directive) {
  return directive.profiling_status() == v1::ProfilingStatus::Enabled &&
         !directive.profiler_config().disable_profiler();
}

absl::Duration ProfilingInterval(const v1::ProfilerConfig& config) {
  return absl::Milliseconds(config.has_profiling_interval_in_milliseconds()
                                ? config.profiling_interval_in_milliseconds()
                                : kDefaultProfilingIntervalMs);
}

// The agent: wires the server connection (configuration directives, stop
// orders, reports), the configuration writer, the uploads and the training
// process, and decides what to report and how to exit.
class Agent final : public ConnectionListener {
 public:
  Agent(const AgentOptions& options, std::ostream& log, std::shared_ptr<grpc::Channel> channel,
        WriteConfinement confinement)
      : options_(options),
        log_(log),
        clock_(*options_.clock),
        confinement_(std::move(confinement)),
        connection_(options_.connection, options_.job,
                    HostIdentity{.host = options_.node_id, .agent = AgentIdentity()},
                    std::move(channel), clock_, log_, options_.security_failures_at_start),
        training_(clock_, options_.stop_grace, log_) {}

  int Run() {
    // `main` blocked SIGTERM / SIGINT before any thread started
    // (client/agent/agent_signals.h); blocked again here for a caller that runs the
    // agent inside its own process. The signal thread takes them.
    const sigset_t previous = BlockAgentStopSignals();
    std::thread signal_thread([this] { TakeSignals(); });
    connection_.StartStream(*this);
    const int code = Supervise();
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
      cv_.SignalAll();
    }
    connection_.Stop();
    signal_thread.join();
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    return code;
  }

  // ConnectionListener: applies a directive, then reports the written
  // version.
  bool OnDirective(const v1::ConnectAgentResponse& directive) override {
    if (!Apply(directive)) return false;
    ReportConfigApplied();
    return true;
  }

  bool Configured() override {
    absl::MutexLock lock(&mu_);
    return applied_version_ > 0;
  }

  void OnStreamFailure(const StreamFailure& failure) override {
    absl::MutexLock lock(&mu_);
    connect_error_ = failure.error;
    if (!failure.final) return;
    if (failure.job_not_found && applied_version_ > 0) {
      OrderStopLocked("the training job was deleted", /*job_deleted=*/true);
    }
    done_connecting_ = true;  // Supervise says why, if it still waits.
    cv_.SignalAll();
  }

 private:
  // Starts the command once the configuration is in place, waits for it and
  // reports its end. Returns the agent's exit code.
  int Supervise() {
    if (std::optional<int> code = AwaitConfiguration(); code.has_value()) return *code;
    // The start is reported before the command starts: once the job is
    // Stopping the server refuses it, so a job whose start it never took has
    // no process a stop must wait for.
    if (std::optional<int> refused = RefuseStart(); refused.has_value()) return *refused;
    if (absl::Status started = StartTraining(); !started.ok()) {
      ReportEnd(Event::EVENT_FAILED, absl::StrCat("cannot start the training command ",
                                                  options_.command[0], ": ", started.message()));
      return 127;
    }
    std::thread progress([this] { ProgressLoop(); });
    const TrainingExit exit = training_.Wait();
    EndCause cause;
    {
      absl::MutexLock lock(&mu_);
      training_ended_ = true;
      cause = end_cause_;
      cv_.SignalAll();
    }
    progress.join();
    objectstore::DirectoryUploader* uploader;
    {
      absl::MutexLock lock(&mu_);
      sampling_.reset();
      uploader = uploader_.get();
    }
    // The server concludes rules on the end report: the output goes up first.
    if (uploader != nullptr) FinishJobOutputUploads(*uploader, options_.upload_wait, log_);
    return ReportExit(exit, cause);
  }

  // Waits up to --connect-timeout for the first configuration. Returns the
  // exit code if the command must not start: a signal came first, the
  // agent refuses the job, or no configuration came.
  std::optional<int> AwaitConfiguration() {
    absl::MutexLock lock(&mu_);
    const absl::Time deadline = clock_.Now() + options_.connect_timeout;
    while (applied_version_ == 0 && !done_connecting_ && end_cause_.agent_signal == 0 &&
           !WaitOnClock(cv_, mu_, clock_, deadline)) {
    }
    if (end_cause_.agent_signal != 0) {
      log_ << "debugplane-agent: received " << SignalName(end_cause_.agent_signal)
           << " before the training command started; not starting it\n";
      return 128 + end_cause_.agent_signal;
    }
    if (!refusal_.ok()) {
      log_ << "debugplane-agent: job '" << options_.job << "': " << refusal_.message()
           << "; not starting the command\n";
      return 2;
    }
    if (applied_version_ == 0) {
      log_ << "debugplane-agent: no configuration for job '" << options_.job << "' from "
           << options_.connection.server << ": " << connect_error_
           << "; not starting the command\n";
      return 7;
    }
    return std::nullopt;
  }

  // Reports EVENT_STARTED; nullopt if the server took it (the job is
  // InProgress). Otherwise logs why the command does not start, reports
  // that there is no process if the job is stopping (EVENT_STOPPED), and
  // returns the agent's exit code: 0, or 7 if the start could not be
  // reported.
  std::optional<int> RefuseStart() {
    std::string stopped_because;
    bool deleted = false;
    {
      absl::MutexLock lock(&mu_);
      if (end_cause_.stop_ordered) stopped_because = stop_reason_;
      deleted = end_cause_.job_deleted;
    }
    absl::StatusOr<v1::TrainingJobStatus::Value> job_status = v1::TrainingJobStatus::Stopping;
    if (stopped_because.empty()) {
      job_status = Report({.event = Event::EVENT_STARTED}, options_.connect_timeout);
      if (!job_status.ok()) {
        log_ << "debugplane-agent: could not report the start of the training to "
             << options_.connection.server << ": " << job_status.status()
             << "; not starting the command\n";
        return 7;
      }
      if (*job_status == v1::TrainingJobStatus::InProgress) return std::nullopt;
      stopped_because = v1::TrainingJobStatus::Value_Name(*job_status);
    }
    log_ << "debugplane-agent: job '" << options_.job << "' is already stopped or ended ("
         << stopped_because << "); not starting the command\n";
    if (*job_status == v1::TrainingJobStatus::Stopping && !deleted) {
      ReportEnd(Event::EVENT_STOPPED,
                "the training command was not started: the job was stopped before it started");
    }
    return 0;
  }

  // Starts the command with the configuration in its environment; a stop
  // order or a signal that came while it started ends it at once.
  absl::Status StartTraining() {
    std::vector<std::string> environment;
    {
      absl::MutexLock lock(&mu_);
      const TrainingPaths& paths = config_writer_->paths();
      environment = TrainingEnvironment(environ, paths.hook_config_path,
                                        paths.profiler_config_path, options_.job,
                                        paths.tensorboard_dir);
      AddProfilerModuleEnvironment(
          environment, std::filesystem::path(paths.profiler_config_path).parent_path().string(),
          ProfilerTraceDir(paths.profiler_dir, options_.node_id), options_.node_id);
    }
    if (absl::Status started = training_.Start(options_.command, environment); !started.ok()) {
      return started;
    }
    absl::MutexLock lock(&mu_);
    if (end_cause_.stop_ordered) {
      training_.Terminate(SIGTERM, stop_reason_);
    } else if (end_cause_.agent_signal != 0) {
      training_.Terminate(end_cause_.agent_signal, AgentSignalledReason());
    }
    return absl::OkStatus();
  }

  // Reports and logs how the command ended; returns the agent's exit code.
  int ReportExit(const TrainingExit& exit, const EndCause& cause) {
    const EndReport end = DescribeTrainingEnd(exit, cause, options_.stop_grace);
    if (!end.log_line.empty()) log_ << end.log_line << "\n";
    if (end.event.has_value()) ReportEnd(*end.event, end.message);
    return end.exit_code;
  }

  // Reports the end of the training (or of the stop), retrying for
  // --report-timeout; logs a failure.
  void ReportEnd(Event::Event event, const std::string& message) {
    absl::Status reported =
        Report({.event = event, .message = message}, options_.report_timeout).status();
    if (!reported.ok()) {
      log_ << "debugplane-agent: could not report the end of the training to "
           << options_.connection.server << ": " << reported << "\n";
    }
  }

  // Sends `report` with the upload backlog (ServerConnection::Report).
  absl::StatusOr<v1::TrainingJobStatus::Value> Report(StatusReport report,
                                                      absl::Duration patience) {
    report.upload_backlog = UploadBacklog();
    return connection_.Report(report, patience);
  }

  // A stop order: SIGTERM to the command's group now, SIGKILL after the
  // grace period (a no-op before the command started: it will not start).
  void OrderStopLocked(const std::string& reason, bool job_deleted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    end_cause_.stop_ordered = true;
    end_cause_.job_deleted = job_deleted;
    stop_reason_ = reason;
    training_.Terminate(SIGTERM, stop_reason_);
  }

  std::string AgentSignalledReason() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return absl::StrCat("debugplane-agent received ", SignalName(end_cause_.agent_signal));
  }

  // Takes SIGTERM / SIGINT sent to the agent until it is done. The first
  // one ends the training as a stop order would (that signal to the
  // command's process group, SIGKILL after --stop-grace) or keeps it from
  // starting; Supervise then reports the exit and the agent exits with
  // 128 + the signal. Later ones go to the command's group as they come.
  void TakeSignals() {
    while (true) {
      const int signal_number = WaitForAgentStopSignal(absl::Milliseconds(100));
      absl::MutexLock lock(&mu_);
      if (done_) return;
      if (signal_number == 0) continue;
      if (end_cause_.agent_signal != 0) {
        training_.PassOn(signal_number);
        continue;
      }
      end_cause_.agent_signal = signal_number;
      if (training_.Running()) {
        training_.Terminate(signal_number, AgentSignalledReason());
      } else {
        log_ << "debugplane-agent: " << AgentSignalledReason() << "\n";
      }
      cv_.SignalAll();
    }
  }

  // Reports every new step seen in the tensor output, and, once a step
  // was reported, every change of the upload backlog's files or error.
  void ProgressLoop() {
    int64_t reported = -1;
    std::string reported_backlog;
    absl::MutexLock lock(&mu_);
    while (!training_ended_) {
      cv_.WaitWithTimeout(&mu_, options_.progress_interval);
      if (training_ended_) break;
      const std::string dir = config_writer_->paths().tensor_dir;
      mu_.Unlock();
      const int64_t step = NewestIndexedStep(dir);
      std::string backlog_now;
      if (std::optional<objectstore::DirectoryUploader::Backlog> backlog = UploadBacklog()) {
        backlog_now = absl::StrCat(backlog->pending_files, " ", backlog->last_error.ToString());
      }
      const int64_t to_report = std::max(step, reported);
      if ((step > reported || (reported >= 0 && backlog_now != reported_backlog)) &&
          Report({.event = Event::EVENT_PROGRESS, .step = to_report}, options_.progress_interval)
              .ok()) {
        reported = to_report;
        reported_backlog = backlog_now;
      }
      mu_.Lock();
    }
  }

  // The uploads' backlog, when the job's output is uploaded.
  std::optional<objectstore::DirectoryUploader::Backlog> UploadBacklog() {
    objectstore::DirectoryUploader* uploader;
    {
      absl::MutexLock lock(&mu_);
      uploader = uploader_.get();
    }
    if (uploader == nullptr) return std::nullopt;
    return uploader->backlog();
  }

  // Tells the server the newest configuration version written to the
  // training's files (EVENT_CONFIG_APPLIED), once per version. Called by the
  // connection thread after a directive; a report that fails is sent again
  // after the next directive (e.g. on reconnecting).
  void ReportConfigApplied() {
    int64_t version;
    {
      absl::MutexLock lock(&mu_);
      version = written_version_;
      if (version <= reported_written_version_) return;
    }
    absl::Status reported =
        Report({.event = Event::EVENT_CONFIG_APPLIED, .applied_config_version = version},
               kConfigAppliedPatience)
            .status();
    absl::MutexLock lock(&mu_);
    if (reported.ok()) {
      reported_written_version_ = std::max(reported_written_version_, version);
    } else if (reported.code() == absl::StatusCode::kInvalidArgument) {
      // A server older than EVENT_CONFIG_APPLIED: the job shows no applied
      // time, the training goes on.
      log_ << "debugplane-agent: the server does not take the applied configuration version ("
           << reported.message() << "); not reporting it\n";
      reported_written_version_ = std::numeric_limits<int64_t>::max();
    }
  }

  // Applies one directive: config files, sampler, stop order. Returns false
  // if the agent refuses the job (see refusal_), having written nothing.
  bool Apply(const v1::ConnectAgentResponse& directive) {
    absl::MutexLock lock(&mu_);
    if (directive.config_version() > applied_version_) {
      if (applied_version_ == 0) {
        if (absl::Status prepared = PrepareJob(directive); !prepared.ok()) {
          refusal_ = std::move(prepared);
          done_connecting_ = true;
          cv_.SignalAll();
          return false;
        }
      }
      ApplyConfigurationLocked(directive);
    }
    if (directive.stop() && !end_cause_.stop_ordered) {
      OrderStopLocked(directive.stop_reason().empty() ? "the training job was stopped"
                                                      : directive.stop_reason(),
                      /*job_deleted=*/false);
    }
    cv_.SignalAll();
    return true;
  }

  // For the first configuration: decides where the job's files go and
  // starts the uploads of its s3:// output. Errors: the agent refuses the
  // job (ChooseTrainingPaths, StartJobOutputUploads).
  absl::Status PrepareJob(const v1::ConnectAgentResponse& directive)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::StatusOr<TrainingPaths> paths = ChooseTrainingPaths(
        {.job = options_.job,
         .tensor_dir = options_.tensor_dir,
         .profiler_dir = options_.profiler_dir,
         .config_dir = options_.config_dir},
        confinement_, directive, log_);
    if (!paths.ok()) return paths.status();
    metrics_writer_ = std::make_unique<SystemMetricsWriter>(paths->profiler_dir, options_.node_id);
    config_writer_ = std::make_unique<TrainingConfigWriter>(*paths);
    // debugplane_profiler beside the config files (on the command's
    // PYTHONPATH); without it only PyTorch jobs that use it lose profiling.
    const std::string module_dir =
        std::filesystem::path(paths->profiler_config_path).parent_path().string();
    if (absl::Status written = WriteProfilerModule(module_dir); !written.ok()) {
      log_ << "debugplane-agent: cannot write debugplane_profiler.py: " << written << "\n";
    }
    absl::StatusOr<std::unique_ptr<objectstore::DirectoryUploader>> uploader =
        StartJobOutputUploads(directive, *paths, log_);
    if (!uploader.ok()) return uploader.status();
    uploader_ = *std::move(uploader);
    return absl::OkStatus();
  }

  // Writes a new configuration version's files and sets the sampler to it.
  void ApplyConfigurationLocked(const v1::ConnectAgentResponse& directive)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const bool profiling = ProfilingEnabled(directive);
    if (absl::Status written = config_writer_->Write(directive, profiling); !written.ok()) {
      log_ << "debugplane-agent: cannot write the configuration: " << written << "\n";
    } else {
      written_version_ = directive.config_version();
    }
    const absl::Duration interval = ProfilingInterval(directive.profiler_config());
    if (!profiling) {
      sampling_.reset();
    } else if (sampling_ == nullptr) {
      sampling_ = std::make_unique<MetricsSamplingLoop>(
          &sampler_, metrics_writer_.get(), MetricsSamplingLoop::Options{.interval = interval});
    } else {
      sampling_->SetInterval(interval);
    }
    applied_version_ = directive.config_version();
  }

  const AgentOptions options_;
  std::ostream& log_;
  base::Clock& clock_;  // *options_.clock.
  const WriteConfinement confinement_;
  ServerConnection connection_;
  TrainingProcess training_;

  absl::Mutex mu_;
  absl::CondVar cv_;  // Any change of the state below.
  int64_t applied_version_ ABSL_GUARDED_BY(mu_) = 0;
  // The newest version whose files were written, and the newest of those
  // the server took (EVENT_CONFIG_APPLIED; int64 max: the server refuses
  // the event).
  int64_t written_version_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reported_written_version_ ABSL_GUARDED_BY(mu_) = 0;
  // The connection gave up: see refusal_, else connect_error_.
  bool done_connecting_ ABSL_GUARDED_BY(mu_) = false;
  // Why the agent refuses the job (its output paths), if it does.
  absl::Status refusal_ ABSL_GUARDED_BY(mu_);
  std::string connect_error_ ABSL_GUARDED_BY(mu_) = "the server did not answer";
  EndCause end_cause_ ABSL_GUARDED_BY(mu_);
  std::string stop_reason_ ABSL_GUARDED_BY(mu_);
  bool training_ended_ ABSL_GUARDED_BY(mu_) = false;  // The command has exited.
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  // Set once, by the first configuration, before the command starts.
  std::unique_ptr<TrainingConfigWriter> config_writer_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SystemMetricsWriter> metrics_writer_ ABSL_GUARDED_BY(mu_);
  SystemMetricsSampler sampler_;  // Used by sampling_'s thread only.
  std::unique_ptr<MetricsSamplingLoop> sampling_ ABSL_GUARDED_BY(mu_);
  // Set once, before the command starts (s3:// output only); lives as long
  // as the agent, so a pointer taken under mu_ stays valid.
  std::unique_ptr<objectstore::DirectoryUploader> uploader_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

int RunAgent(const AgentOptions& options, std::ostream& log) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = MakeChannel(options.connection);
  if (!channel.ok()) {
    log << "debugplane-agent: " << channel.status().message() << "\n";
    return 2;
  }
  std::error_code error;
  const fs::path working_directory = fs::current_path(error);
  if (error) {
    log << "debugplane-agent: cannot read the working directory: " << error.message() << "\n";
    return 2;
  }
  absl::StatusOr<WriteConfinement> confinement =
      WriteConfinement::Create(AgentWritableRoots(options, working_directory.string()));
  if (!confinement.ok()) {
    log << "debugplane-agent: " << confinement.status().message() << "\n";
    return 2;
  }
  AgentOptions resolved = options;
  absl::StatusOr<std::string> host = ResolveHostName(
      options.node_id, [](const char* name) -> const char* { return std::getenv(name); },
      MachineName());
  if (!host.ok()) {
    log << "debugplane-agent: " << host.status().message() << "\n";
    return 2;
  }
  resolved.node_id = *host;
  Agent agent(resolved, log, *std::move(channel), *std::move(confinement));
  return agent.Run();
}

}  // namespace debugplane::client
