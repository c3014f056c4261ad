#include "client/agent/agent.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/agent/agent_signals.h"
#include "client/common/connection.h"
#include "client/agent/output_uploads.h"
#include "client/agent/smdebug_config_files.h"
#include "client/agent/system_metrics.h"
#include "client/agent/write_confinement.h"
#include "debugplane/v1/training_agent.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "objectstore/aws_config.h"
#include "objectstore/directory_uploader.h"

extern char** environ;

namespace debugplane::client {
namespace {

namespace fs = std::filesystem;
using Event = v1::ReportTrainingStatusRequest;

constexpr absl::Duration kMaxBackoff = absl::Seconds(5);
// How long a probe of the server's transport (TLS or not) may take.
constexpr absl::Duration kProbeTimeout = absl::Seconds(2);

// The local directory an output URI names: an absolute path or file://
// URI; "" for object storage.
std::string LocalDirectory(const std::string& uri) {
  absl::string_view path = uri;
  if (absl::ConsumePrefix(&path, "file://")) return std::string(path);
  if (absl::StartsWith(path, "/")) return std::string(path);
  return "";
}

// The newest global step in a trial's index (…/index/<n>/<step>_<worker>.json),
// or -1. Only the last index directory is listed.
int64_t NewestIndexedStep(const std::string& tensor_dir) {
  std::error_code error;
  fs::path newest_dir;
  for (const auto& entry : fs::directory_iterator(fs::path(tensor_dir) / "index", error)) {
    if (entry.is_directory(error) && entry.path() > newest_dir) newest_dir = entry.path();
  }
  if (newest_dir.empty()) return -1;
  int64_t newest = -1;
  for (const auto& entry : fs::directory_iterator(newest_dir, error)) {
    const std::string name = entry.path().filename().string();
    int64_t step;
    if (name.size() > 12 && absl::SimpleAtoi(name.substr(0, 12), &step)) {
      newest = std::max(newest, step);
    }
  }
  return newest;
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) {
    return absl::StrCat("the training command exited with code ", WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    return absl::StrCat("the training command was killed by signal ", WTERMSIG(status), " (",
                        strsignal(WTERMSIG(status)), ")");
  }
  return "the training command ended";
}

// Seconds with one decimal, as people read them: "0.4 s".
std::string Seconds(absl::Duration duration) {
  return absl::StrFormat("%.1f s", absl::ToDoubleSeconds(duration));
}

// Whether the environment entry `entry` ("NAME=value") is one the training
// command does not get: the agent's own key to the control plane
// (DEBUGPLANE_TOKEN) is for the agent alone (an agent key may act for every
// job), and the configuration paths the agent sets itself.
bool KeptFromTheCommand(absl::string_view entry) {
  for (absl::string_view name :
       {"DEBUGPLANE_TOKEN=", "SMDEBUG_CONFIG_FILE_PATH=", "SMPROFILER_CONFIG_PATH="}) {
    if (absl::StartsWith(entry, name)) return true;
  }
  return false;
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

class Agent {
 public:
  Agent(const AgentOptions& options, std::ostream& log, std::shared_ptr<grpc::Channel> channel,
        WriteConfinement confinement)
      : options_(options),
        log_(log),
        stub_(v1::TrainingAgentService::NewStub(std::move(channel))),
        confinement_(std::move(confinement)) {}

  int Run() {
    // `main` blocked SIGTERM / SIGINT before any thread started
    // (client/agent/agent_signals.h); blocked again here for a caller that runs the
    // agent inside its own process. The signal thread takes them.
    const sigset_t previous = BlockAgentStopSignals();
    signal_thread_ = std::thread([this] { TakeSignals(); });
    connection_ = std::thread([this] { ConnectionLoop(); });
    const int code = Supervise();
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
      if (stream_context_ != nullptr) stream_context_->TryCancel();
      cv_.SignalAll();
    }
    connection_.join();
    signal_thread_.join();
    if (killer_.joinable()) killer_.join();
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    return code;
  }

 private:
  // Starts the command once the configuration is in place, waits for it and
  // reports its end. Returns the agent's exit code.
  int Supervise() {
    {
      absl::MutexLock lock(&mu_);
      const absl::Time deadline = absl::Now() + options_.connect_timeout;
      while (applied_version_ == 0 && !done_connecting_ && agent_signal_ == 0 &&
             absl::Now() < deadline) {
        cv_.WaitWithDeadline(&mu_, deadline);
      }
      if (agent_signal_ != 0) {
        log_ << "debugplane-agent: received " << SignalName(agent_signal_)
             << " before the training command started; not starting it\n";
        return 128 + agent_signal_;
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
    }
    // The start is reported before the command starts: once the job is
    // Stopping the server refuses it, so a job whose start it never took has
    // no process a stop must wait for.
    if (std::optional<int> refused = RefuseStart(); refused.has_value()) return *refused;
    const pid_t pid = Spawn();
    if (pid < 0) {
      ReportEnd(Event::EVENT_FAILED, absl::StrCat("cannot start the training command ",
                                                  options_.command[0], ": ", std::strerror(errno)));
      return 127;
    }
    std::thread progress([this] { ProgressLoop(); });

    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    const absl::Time exited_at = absl::Now();
    bool stopped, deleted;
    std::optional<absl::Time> term_sent_at;
    bool killed;
    int agent_signal;
    {
      absl::MutexLock lock(&mu_);
      child_exited_ = true;
      stopped = stop_ordered_;
      deleted = job_deleted_;
      term_sent_at = term_sent_at_;
      killed = kill_sent_;
      agent_signal = agent_signal_;
      cv_.SignalAll();
    }
    progress.join();
    sampling_.reset();
    // The server concludes rules on the end report: the output goes up first.
    FinishUploads();
    const int code = WIFEXITED(status)     ? WEXITSTATUS(status)
                     : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                           : 1;
    const bool signal_reached_it = term_sent_at.has_value() && *term_sent_at <= exited_at;
    if (agent_signal != 0 && !stopped) {
      // Not a stop order: the job ends as Failed, saying the agent was
      // signalled (a service manager's stop, Ctrl-C), and the agent's exit
      // code says so too.
      const std::string how =
          signal_reached_it
              ? DescribeExitAfterAgentSignal(agent_signal, status, killed,
                                             exited_at - *term_sent_at, options_.stop_grace)
              : absl::StrCat(DescribeExit(status), " before ", SignalName(agent_signal),
                             " to debugplane-agent reached it");
      log_ << "debugplane-agent: " << how << "\n";
      ReportEnd(Event::EVENT_FAILED, how);
      return 128 + agent_signal;
    }
    if (stopped) {
      const std::string how =
          term_sent_at.has_value() && *term_sent_at <= exited_at
              ? DescribeStoppedExit(status, killed, exited_at - *term_sent_at, options_.stop_grace)
              : absl::StrCat(DescribeExit(status), " before the stop order reached it");
      log_ << "debugplane-agent: the training command was stopped: " << how << "\n";
      // The job is Stopping; it is Stopped once the server has this report
      // (a deleted job has nobody to tell).
      if (!deleted) ReportEnd(Event::EVENT_STOPPED, how);
      return agent_signal != 0 ? 128 + agent_signal : code;
    }
    const bool succeeded = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    ReportEnd(succeeded ? Event::EVENT_COMPLETED : Event::EVENT_FAILED,
              succeeded ? "" : DescribeExit(status));
    return code;
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
      if (stop_ordered_) stopped_because = stop_reason_;
      deleted = job_deleted_;
    }
    absl::StatusOr<v1::TrainingJobStatus::Value> job_status = v1::TrainingJobStatus::Stopping;
    if (stopped_because.empty()) {
      job_status = Report(Event::EVENT_STARTED, std::nullopt, "", options_.connect_timeout);
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

  // Reports the end of the training (or of the stop), retrying for
  // --report-timeout; logs a failure.
  void ReportEnd(Event::Event event, const std::string& message) {
    absl::Status reported = Report(event, std::nullopt, message, options_.report_timeout).status();
    if (!reported.ok()) {
      log_ << "debugplane-agent: could not report the end of the training to "
           << options_.connection.server << ": " << reported << "\n";
    }
  }

  pid_t Spawn() {
    std::vector<std::string> environment;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      if (!KeptFromTheCommand(*entry)) environment.emplace_back(*entry);
    }
    {
      absl::MutexLock lock(&mu_);
      environment.push_back(absl::StrCat("SMDEBUG_CONFIG_FILE_PATH=", hook_config_path_));
      environment.push_back(absl::StrCat("SMPROFILER_CONFIG_PATH=", profiler_config_path_));
      environment.push_back(absl::StrCat("DP_TRAINING_JOB_NAME=", options_.job));
    }
    // Everything the child needs is prepared before fork: after it, only
    // async-signal-safe calls.
    std::vector<char*> argv, envp;
    std::vector<std::string> args = options_.command;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    for (auto& entry : environment) envp.push_back(entry.data());
    envp.push_back(nullptr);
    sigset_t none;
    sigemptyset(&none);
    const pid_t pid = fork();
    if (pid == 0) {
      setpgid(0, 0);  // Its own group: a stop reaches what it started too.
      pthread_sigmask(SIG_SETMASK, &none, nullptr);
      execvpe(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    if (pid > 0) {
      setpgid(pid, pid);  // Also here, so a stop right after fork finds the group.
      absl::MutexLock lock(&mu_);
      child_pid_ = pid;
      if (stop_ordered_) {
        StopChildLocked();  // Ordered while starting.
      } else if (agent_signal_ != 0) {
        TerminateChildLocked(agent_signal_, AgentSignalledReason());
      }
    }
    return pid;
  }

  // A stop order: SIGTERM to the command's group now, SIGKILL after the
  // grace period.
  void StopChildLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    TerminateChildLocked(SIGTERM, stop_reason_);
  }

  std::string AgentSignalledReason() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return absl::StrCat("debugplane-agent received ", SignalName(agent_signal_));
  }

  // `signal_number` to the command's group now, SIGKILL after the grace
  // period; `why` is logged. A no-op once a termination is under way.
  void TerminateChildLocked(int signal_number, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (child_pid_ <= 0 || child_exited_ || killer_.joinable()) return;
    log_ << "debugplane-agent: stopping the training command (" << SignalName(signal_number)
         << " to its process group " << child_pid_ << "): " << why << "\n";
    term_sent_at_ = absl::Now();
    kill(-child_pid_, signal_number);
    const pid_t pid = child_pid_;
    killer_ = std::thread([this, pid, signal_number] {
      absl::MutexLock lock(&mu_);
      const absl::Time deadline = absl::Now() + options_.stop_grace;
      while (!child_exited_ && absl::Now() < deadline) cv_.WaitWithDeadline(&mu_, deadline);
      if (!child_exited_) {
        log_ << "debugplane-agent: the training command did not exit within "
             << absl::FormatDuration(options_.stop_grace) << " of " << SignalName(signal_number)
             << "; killing it\n";
        kill_sent_ = true;
        kill(-pid, SIGKILL);
      }
    });
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
      if (agent_signal_ != 0) {
        if (child_pid_ > 0 && !child_exited_) kill(-child_pid_, signal_number);
        continue;
      }
      agent_signal_ = signal_number;
      if (child_pid_ > 0 && !child_exited_) {
        TerminateChildLocked(signal_number, AgentSignalledReason());
      } else {
        log_ << "debugplane-agent: " << AgentSignalledReason() << "\n";
      }
      cv_.SignalAll();
    }
  }

  // Reports every new step seen in the tensor output.
  // Reports every new step seen in the tensor output, and, once a step
  // was reported, every change of the upload backlog's files or error.
  void ProgressLoop() {
    int64_t reported = -1;
    std::string reported_backlog;
    absl::MutexLock lock(&mu_);
    while (!child_exited_) {
      cv_.WaitWithTimeout(&mu_, options_.progress_interval);
      if (child_exited_) break;
      const std::string dir = tensor_dir_;
      mu_.Unlock();
      const int64_t step = NewestIndexedStep(dir);
      std::string backlog_now;
      if (std::optional<objectstore::DirectoryUploader::Backlog> backlog = UploadBacklog()) {
        backlog_now = absl::StrCat(backlog->pending_files, " ", backlog->last_error.ToString());
      }
      const int64_t to_report = std::max(step, reported);
      if ((step > reported || (reported >= 0 && backlog_now != reported_backlog)) &&
          Report(Event::EVENT_PROGRESS, to_report, "", options_.progress_interval).ok()) {
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

  // Waits (up to --upload-wait) for the last files to go up; logs the
  // outcome.
  void FinishUploads() {
    objectstore::DirectoryUploader* uploader;
    {
      absl::MutexLock lock(&mu_);
      uploader = uploader_.get();
    }
    if (uploader == nullptr) return;
    const absl::Status finished = uploader->Finish(options_.upload_wait);
    const objectstore::DirectoryUploader::Backlog backlog = uploader->backlog();
    if (finished.ok()) {
      log_ << "debugplane-agent: uploaded " << backlog.uploaded_files << " files ("
           << backlog.uploaded_bytes << " bytes) of the job's output\n";
    } else {
      log_ << "debugplane-agent: " << finished.message() << " (--upload-wait); they stay on disk\n";
    }
    if (backlog.refused_files > 0) {
      log_ << "debugplane-agent: " << backlog.refused_files
           << " files of the job's output could not be uploaded (each is named above); the last: "
           << backlog.last_refusal.message() << "\n";
    }
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
        Report(Event::EVENT_CONFIG_APPLIED, std::nullopt, "", kProbeTimeout, version).status();
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

  // Calls ReportTrainingStatus, retrying while the server is unreachable,
  // for up to `patience`. Returns the job's status after the report.
  // `message` is the FailureReason of EVENT_FAILED, the StatusMessage of
  // EVENT_STOPPED; `applied_config_version` goes with EVENT_CONFIG_APPLIED.
  absl::StatusOr<v1::TrainingJobStatus::Value> Report(Event::Event event,
                                                      std::optional<int64_t> step,
                                                      const std::string& message,
                                                      absl::Duration patience,
                                                      int64_t applied_config_version = 0) {
    v1::ReportTrainingStatusRequest request;
    request.set_training_job_name(options_.job);
    request.set_event(event);
    if (step.has_value()) request.set_current_step(*step);
    if (event == Event::EVENT_CONFIG_APPLIED) {
      request.set_applied_config_version(applied_config_version);
    }
    if (event == Event::EVENT_STOPPED) {
      request.set_status_message(message);
    } else {
      request.set_failure_reason(message);
    }
    if (std::optional<objectstore::DirectoryUploader::Backlog> backlog = UploadBacklog()) {
      v1::UploadBacklog* out = request.mutable_upload_backlog();
      out->set_pending_files(backlog->pending_files);
      out->set_pending_bytes(backlog->pending_bytes);
      out->set_uploaded_files(backlog->uploaded_files);
      out->set_uploaded_bytes(backlog->uploaded_bytes);
      out->set_last_error(std::string(backlog->last_error.message()));
    }
    const absl::Time deadline = absl::Now() + patience;
    absl::Duration backoff = absl::Milliseconds(100);
    std::unique_ptr<v1::TrainingAgentService::Stub> retry_stub;  // See FreshStub.
    while (true) {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
      v1::ReportTrainingStatusResponse response;
      grpc::Status status = (retry_stub != nullptr ? *retry_stub : *stub_)
                                .ReportTrainingStatus(&context, request, &response);
      if (status.ok()) return response.training_job_status();
      const bool retry = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
      if (!retry || absl::Now() + backoff > deadline) {
        return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                            status.error_message());
      }
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, kMaxBackoff);
      if (auto fresh = FreshStub(); fresh != nullptr) retry_stub = std::move(fresh);
    }
  }

  // A stub on a new channel to the server, or null if none can be made.
  // Retries after a lost connection go through one: the agent's channel
  // keeps failing calls with its last error ("Connection refused") until
  // its own reconnection, seconds after the server is back (16 s measured
  // after a kill -9 and a restart on the same port; 0.2 s on a new channel).
  std::unique_ptr<v1::TrainingAgentService::Stub> FreshStub() const {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = MakeChannel(options_.connection);
    if (!channel.ok()) return nullptr;
    return v1::TrainingAgentService::NewStub(*std::move(channel));
  }

  // Keeps a ConnectAgent stream open, reconnecting with backoff, until the
  // job has ended or the agent is done.
  void ConnectionLoop() {
    v1::ConnectAgentRequest request;
    request.set_training_job_name(options_.job);
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    request.set_host(host);
    absl::Duration backoff = absl::Milliseconds(50);
    bool lost = false;
    std::unique_ptr<v1::TrainingAgentService::Stub> connect_stub;  // See FreshStub.
    int security_failures = 0;                                     // In a row.
    std::string security_problem;                                  // The last one logged.
    while (true) {
      auto context = std::make_shared<grpc::ClientContext>();
      {
        absl::MutexLock lock(&mu_);
        if (done_) return;
        stream_context_ = context;
      }
      // After a lost connection, each attempt on a new channel (FreshStub).
      if (lost) {
        if (auto fresh = FreshStub(); fresh != nullptr) connect_stub = std::move(fresh);
      }
      v1::TrainingAgentService::Stub& stub = connect_stub != nullptr ? *connect_stub : *stub_;
      std::unique_ptr<grpc::ClientReader<v1::ConnectAgentResponse>> reader =
          stub.ConnectAgent(context.get(), request);
      v1::ConnectAgentResponse directive;
      bool delivered = false;  // This connection worked: its end is no security problem.
      while (reader->Read(&directive)) {
        delivered = true;
        if (lost) {
          log_ << "debugplane-agent: reconnected to " << options_.connection.server << "\n";
          lost = false;
        }
        backoff = absl::Milliseconds(50);
        security_failures = 0;
        if (!Apply(directive)) {
          context->TryCancel();  // Refused: the job cannot run under this agent.
          break;
        }
        ReportConfigApplied();
      }
      const grpc::Status status = reader->Finish();
      // Probing the server (blocking I/O) happens outside the lock.
      const std::optional<std::string> security =
          delivered ? std::nullopt : DiagnoseSecurityFailure(options_.connection, status, [this] {
            return ProbeServerTransport(options_.connection.server, kProbeTimeout);
          });
      absl::MutexLock lock(&mu_);
      stream_context_ = nullptr;
      if (done_ || done_connecting_) return;
      if (status.ok()) return;  // The job has ended; its last directive was applied.
      if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
          status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED &&
          status.error_code() != grpc::StatusCode::CANCELLED) {
        connect_error_ = absl::StrCat(status.error_message(), " (code ", status.error_code(), ")");
        log_ << "debugplane-agent: job '" << options_.job << "': " << connect_error_ << "\n";
        if (status.error_code() == grpc::StatusCode::NOT_FOUND && applied_version_ > 0) {
          stop_ordered_ = true;
          job_deleted_ = true;
          stop_reason_ = "the training job was deleted";
          StopChildLocked();
        }
        done_connecting_ = true;
        cv_.SignalAll();
        return;
      }
      if (security.has_value()) {
        connect_error_ = *security;
        if (applied_version_ == 0 && ++security_failures >= options_.security_failures_at_start) {
          done_connecting_ = true;  // Supervise says why and exits.
          cv_.SignalAll();
          return;
        }
        // Before the start, Supervise says it once the agent gives up.
        if (applied_version_ > 0 && *security != security_problem) {
          log_ << "debugplane-agent: " << *security << "; reconnecting, the training goes on\n";
          security_problem = *security;
        }
        lost = true;
      } else {
        security_failures = 0;
        connect_error_ = status.error_message();
      }
      if (!lost) {
        log_ << "debugplane-agent: lost the connection to " << options_.connection.server << " ("
             << status.error_message() << "); reconnecting, the training goes on\n";
        lost = true;
      }
      const absl::Time until = absl::Now() + backoff;
      while (!done_ && absl::Now() < until) cv_.WaitWithDeadline(&mu_, until);
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
  }

  // Applies one directive: config files, sampler, stop order. Returns false
  // if the agent refuses the job (see refusal_), having written nothing.
  bool Apply(const v1::ConnectAgentResponse& directive) {
    absl::MutexLock lock(&mu_);
    if (directive.config_version() > applied_version_) {
      if (applied_version_ == 0) {
        if (absl::Status chosen = ChooseDirectories(directive); !chosen.ok()) {
          refusal_ = std::move(chosen);
          done_connecting_ = true;
          cv_.SignalAll();
          return false;
        }
      }
      const bool profiling = directive.profiling_status() == v1::ProfilingStatus::Enabled &&
                             !directive.profiler_config().disable_profiler();
      // profilerconfig.json first: it is what an update changes and what the
      // training process re-reads at every step. The hook configuration is
      // rewritten only when its text changes (never, after the first).
      absl::Status written = WriteFileAtomically(
          profiler_config_path_,
          ProfilerConfigJson(directive.profiler_config(), profiling, smdebug_profiler_dir_));
      std::string hook = DebugHookConfigJson(directive.debug_hook_config(), tensor_dir_);
      if (written.ok() && hook != written_hook_config_) {
        written = WriteFileAtomically(hook_config_path_, hook);
        if (written.ok()) written_hook_config_ = std::move(hook);
      }
      if (!written.ok()) {
        log_ << "debugplane-agent: cannot write the configuration: " << written << "\n";
      } else {
        written_version_ = directive.config_version();
      }
      const absl::Duration interval =
          absl::Milliseconds(directive.profiler_config().has_profiling_interval_in_milliseconds()
                                 ? directive.profiler_config().profiling_interval_in_milliseconds()
                                 : 500);
      if (!profiling) {
        sampling_.reset();
      } else if (sampling_ == nullptr) {
        sampling_ = std::make_unique<MetricsSamplingLoop>(
            &sampler_, writer_.get(), MetricsSamplingLoop::Options{.interval = interval});
      } else {
        sampling_->SetInterval(interval);
      }
      applied_version_ = directive.config_version();
    }
    if (directive.stop() && !stop_ordered_) {
      stop_ordered_ = true;
      stop_reason_ = directive.stop_reason().empty() ? "the training job was stopped"
                                                     : directive.stop_reason();
      StopChildLocked();
    }
    cv_.SignalAll();
    return true;
  }

  // Where an output goes: the flag if given, else the job's path (which
  // must be inside the confinement: the real path is returned), else the
  // agent's own state directory. Creates nothing.
  absl::StatusOr<OutputDirectory> PickOutputDirectory(const std::string& flag,
                                                      const std::vector<OutputPath>& job_paths,
                                                      const std::string& alternative,
                                                      const fs::path& fallback) const {
    if (!flag.empty()) return OutputDirectory{flag};
    for (const OutputPath& job_path : job_paths) {
      if (job_path.path.empty()) continue;
      absl::StatusOr<std::string> real =
          confinement_.Confine(job_path.field, job_path.path, alternative);
      if (!real.ok()) return real.status();
      return OutputDirectory{*std::move(real), /*from_job=*/true};
    }
    return OutputDirectory{fallback.string()};
  }

  // Decides where the tensors, the profiler output and the config files go,
  // and creates the job's output directories. Errors (nothing is created):
  // a job path the confinement refuses, a directory that cannot be made.
  absl::Status ChooseDirectories(const v1::ConnectAgentResponse& directive)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const char* tmp = std::getenv("TMPDIR");
    const fs::path state =
        fs::path(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") / "debugplane-agent" / options_.job;
    const v1::DebugHookConfig& hook_config = directive.debug_hook_config();
    absl::StatusOr<OutputDirectory> tensors = PickOutputDirectory(
        options_.tensor_dir,
        {{"DebugHookConfig.S3OutputPath", LocalDirectory(hook_config.s3_output_path())},
         {"DebugHookConfig.LocalPath", hook_config.local_path()}},
        "--tensor-dir DIR", state / "tensors");
    if (!tensors.ok()) return tensors.status();
    const v1::ProfilerConfig& profiler_config = directive.profiler_config();
    std::vector<OutputPath> profiler_paths = {
        {"ProfilerConfig.S3OutputPath", LocalDirectory(profiler_config.s3_output_path())}};
    if (auto local = profiler_config.profiling_parameters().find("LocalPath");
        local != profiler_config.profiling_parameters().end()) {
      profiler_paths.push_back({"ProfilerConfig.ProfilingParameters.LocalPath", local->second});
    }
    absl::StatusOr<OutputDirectory> profiler = PickOutputDirectory(
        options_.profiler_dir, profiler_paths, "--profiler-dir DIR", state / "profiler");
    if (!profiler.ok()) return profiler.status();
    // Made here, where no symbolic link can divert them, before the
    // training (and the sampler) write below them by name.
    for (const OutputDirectory* dir : {&*tensors, &*profiler}) {
      if (!dir->from_job) continue;
      if (absl::Status made = confinement_.CreateDirectories(dir->path); !made.ok()) return made;
    }
    tensor_dir_ = std::move(tensors->path);
    profiler_dir_ = std::move(profiler->path);
    const fs::path config_dir =
        options_.config_dir.empty() ? state / "config" : fs::path(options_.config_dir);
    hook_config_path_ = (config_dir / "debughookconfig.json").string();
    profiler_config_path_ = (config_dir / "profilerconfig.json").string();
    writer_ = std::make_unique<SystemMetricsWriter>(profiler_dir_, options_.node_id);
    log_ << "debugplane-agent: job '" << options_.job << "': tensors in " << tensor_dir_
         << ", profiler output in " << profiler_dir_ << ", configuration in " << config_dir.string()
         << "\n";
    // smdebug lower-cases profilerconfig.json, LocalPath included.
    absl::StatusOr<std::string> alias =
        LowerCaseAlias(profiler_dir_, LowerCaseAliasRoot(tmp != nullptr ? tmp : ""));
    if (alias.ok()) {
      smdebug_profiler_dir_ = *std::move(alias);
      if (smdebug_profiler_dir_ != profiler_dir_) {
        log_ << "debugplane-agent: profilerconfig.json names the profiler output "
             << smdebug_profiler_dir_
             << " (a symlink to it that survives smdebug's lower-casing)\n";
      }
    } else {
      smdebug_profiler_dir_ = profiler_dir_;
      log_ << "debugplane-agent: " << alias.status().message()
           << "; smdebug lower-cases that path, so its framework timelines will go to "
           << absl::AsciiStrToLower(profiler_dir_) << ", where the server does not read them\n";
    }
    return StartUploads(directive);
  }

  // For a job whose tensor or profiler output is s3://: creates the local
  // directories the training writes (the agent's own, when no job path or
  // flag placed them) and starts uploading them. Errors name the field.
  absl::Status StartUploads(const v1::ConnectAgentResponse& directive)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<OutputUpload> uploads;
    const std::string& hook_uri = directive.debug_hook_config().s3_output_path();
    const std::string& profiler_uri = directive.profiler_config().s3_output_path();
    if (absl::StartsWith(hook_uri, "s3://")) {
      uploads.push_back({"DebugHookConfig.S3OutputPath", hook_uri, tensor_dir_, {}});
    }
    if (absl::StartsWith(profiler_uri, "s3://")) {
      // The sampler appends to its hour's file (client/agent/system_metrics.h).
      uploads.push_back({"ProfilerConfig.S3OutputPath", profiler_uri, profiler_dir_, {"system/"}});
    }
    if (uploads.empty()) return absl::OkStatus();
    for (const OutputUpload& upload : uploads) {
      std::error_code error;
      fs::create_directories(upload.local_dir, error);
      if (error) {
        return absl::FailedPreconditionError(absl::StrCat("cannot create ", upload.local_dir,
                                                          " for ", upload.field, " ", upload.uri,
                                                          ": ", error.message()));
      }
    }
    absl::StatusOr<std::unique_ptr<objectstore::DirectoryUploader>> uploader = StartOutputUploads(
        uploads, objectstore::ProcessEnvironment(),
        [this](const std::string& line) { log_ << "debugplane-agent: " << line << "\n"; });
    if (!uploader.ok()) return uploader.status();
    if (*uploader == nullptr) return absl::OkStatus();  // No credentials here: said why.
    uploader_ = *std::move(uploader);
    for (const OutputUpload& upload : uploads) {
      log_ << "debugplane-agent: uploading " << upload.local_dir << " to " << upload.uri << " ("
           << upload.field << ") as each file is complete\n";
    }
    return absl::OkStatus();
  }

  const AgentOptions options_;
  std::ostream& log_;
  std::unique_ptr<v1::TrainingAgentService::Stub> stub_;
  const WriteConfinement confinement_;

  absl::Mutex mu_;
  absl::CondVar cv_;  // Any change of the state below.
  int64_t applied_version_ ABSL_GUARDED_BY(mu_) = 0;
  // The newest version whose files were written, and the newest of those
  // the server took (EVENT_CONFIG_APPLIED; int64 max: the server refuses
  // the event).
  int64_t written_version_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reported_written_version_ ABSL_GUARDED_BY(mu_) = 0;
  // Gave up: see refusal_, else connect_error_.
  bool done_connecting_ ABSL_GUARDED_BY(mu_) = false;
  // Why the agent refuses the job (its output paths), if it does.
  absl::Status refusal_ ABSL_GUARDED_BY(mu_);
  std::string connect_error_ ABSL_GUARDED_BY(mu_) = "the server did not answer";
  bool stop_ordered_ ABSL_GUARDED_BY(mu_) = false;
  bool job_deleted_ ABSL_GUARDED_BY(mu_) = false;  // The stop order is the deletion.
  std::string stop_reason_ ABSL_GUARDED_BY(mu_);
  // When SIGTERM went to the command (unset: it exited before), and whether
  // SIGKILL followed after --stop-grace.
  std::optional<absl::Time> term_sent_at_ ABSL_GUARDED_BY(mu_);
  bool kill_sent_ ABSL_GUARDED_BY(mu_) = false;
  // The first SIGTERM / SIGINT sent to the agent (0: none).
  int agent_signal_ ABSL_GUARDED_BY(mu_) = 0;
  pid_t child_pid_ ABSL_GUARDED_BY(mu_) = -1;
  bool child_exited_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<grpc::ClientContext> stream_context_ ABSL_GUARDED_BY(mu_);
  std::string tensor_dir_ ABSL_GUARDED_BY(mu_);
  std::string profiler_dir_ ABSL_GUARDED_BY(mu_);
  // profiler_dir_ as profilerconfig.json names it: see LowerCaseAlias.
  std::string smdebug_profiler_dir_ ABSL_GUARDED_BY(mu_);
  std::string hook_config_path_ ABSL_GUARDED_BY(mu_);
  std::string profiler_config_path_ ABSL_GUARDED_BY(mu_);
  std::string written_hook_config_ ABSL_GUARDED_BY(mu_);  // What debughookconfig.json holds.
  SystemMetricsSampler sampler_;                          // Used by sampling_'s thread only.
  std::unique_ptr<SystemMetricsWriter> writer_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<MetricsSamplingLoop> sampling_ ABSL_GUARDED_BY(mu_);
  // Set once, before the command starts (s3:// output only); lives as long
  // as the agent, so a pointer taken under mu_ stays valid.
  std::unique_ptr<objectstore::DirectoryUploader> uploader_ ABSL_GUARDED_BY(mu_);

  std::thread connection_;
  std::thread signal_thread_;
  std::thread killer_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::string DescribeStoppedExit(int wait_status, bool killed_after_grace,
                                absl::Duration since_stop_order, absl::Duration stop_grace) {
  const std::string when = absl::StrCat(Seconds(since_stop_order), " after the stop order");
  if (killed_after_grace && WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL) {
    return absl::StrCat("the training command did not exit within the ",
                        absl::FormatDuration(stop_grace),
                        " grace period after SIGTERM and was killed (SIGKILL, signal 9), ", when);
  }
  if (WIFSIGNALED(wait_status)) {
    return absl::StrCat("the training command was ended by signal ", WTERMSIG(wait_status), " (",
                        strsignal(WTERMSIG(wait_status)), ") after SIGTERM (signal 15), ", when);
  }
  if (WIFEXITED(wait_status)) {
    return absl::StrCat("the training command exited with code ", WEXITSTATUS(wait_status),
                        " after SIGTERM (signal 15), ", when);
  }
  return absl::StrCat("the training command ended after SIGTERM (signal 15), ", when);
}

std::string DescribeExitAfterAgentSignal(int agent_signal, int wait_status, bool killed_after_grace,
                                         absl::Duration since_signal, absl::Duration stop_grace) {
  const std::string passed_on = absl::StrCat("debugplane-agent received ", SignalName(agent_signal),
                                             " and passed it on to the training command, which ");
  const std::string when = absl::StrCat(Seconds(since_signal), " later");
  if (killed_after_grace && WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL) {
    return absl::StrCat(passed_on, "did not exit within the ", absl::FormatDuration(stop_grace),
                        " grace period and was killed (SIGKILL, signal 9), ", when);
  }
  if (WIFSIGNALED(wait_status)) {
    return absl::StrCat(passed_on, "was ended by signal ", WTERMSIG(wait_status), " (",
                        strsignal(WTERMSIG(wait_status)), ") ", when);
  }
  if (WIFEXITED(wait_status)) {
    return absl::StrCat(passed_on, "exited with code ", WEXITSTATUS(wait_status), " ", when);
  }
  return absl::StrCat(passed_on, "ended ", when);
}

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
  Agent agent(options, log, *std::move(channel), *std::move(confinement));
  return agent.Run();
}

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
  run_command->add_option("--node-id", options.node_id, "NodeId of the system metrics")
      ->capture_default_str();
  double stop_grace_s = absl::ToDoubleSeconds(options.stop_grace);
  run_command->add_option("--stop-grace", stop_grace_s, "Seconds between SIGTERM and SIGKILL")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  double upload_wait_s = absl::ToDoubleSeconds(options.upload_wait);
  run_command
      ->add_option("--upload-wait", upload_wait_s,
                   "Seconds the agent waits, after the command has exited, for the last files of "
                   "an s3:// job's output to be uploaded before it reports the end")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
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
  options.stop_grace = absl::Seconds(stop_grace_s);
  options.upload_wait = absl::Seconds(upload_wait_s);
  run = true;
  return 0;
}

}  // namespace debugplane::client
