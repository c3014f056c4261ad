#include "client/agent.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
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
#include "client/smdebug_config_files.h"
#include "client/system_metrics.h"
#include "debugplane/v1/training_agent.grpc.pb.h"
#include "grpcpp/grpcpp.h"

extern char** environ;

namespace debugplane::client {
namespace {

namespace fs = std::filesystem;
using Event = v1::ReportTrainingStatusRequest;

constexpr absl::Duration kMaxBackoff = absl::Seconds(5);

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

class Agent {
 public:
  Agent(const AgentOptions& options, std::ostream& log)
      : options_(options),
        log_(log),
        stub_(v1::TrainingAgentService::NewStub(
            grpc::CreateChannel(options.server, grpc::InsecureChannelCredentials()))) {}

  int Run() {
    // SIGTERM / SIGINT to the agent go to the command (forwarded by the
    // signal thread); every thread started below inherits the mask.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    sigset_t previous;
    pthread_sigmask(SIG_BLOCK, &signals, &previous);

    connection_ = std::thread([this] { ConnectionLoop(); });
    const int code = Supervise();
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
      if (stream_context_ != nullptr) stream_context_->TryCancel();
      cv_.SignalAll();
    }
    connection_.join();
    if (signal_thread_.joinable()) signal_thread_.join();
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
      while (applied_version_ == 0 && !done_connecting_ && absl::Now() < deadline) {
        cv_.WaitWithDeadline(&mu_, deadline);
      }
      if (applied_version_ == 0) {
        log_ << "debugplane-agent: no configuration for job '" << options_.job << "' from "
             << options_.server << ": " << connect_error_ << "\n";
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
    signal_thread_ = std::thread([this] { ForwardSignals(); });
    std::thread progress([this] { ProgressLoop(); });

    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    const absl::Time exited_at = absl::Now();
    bool stopped, deleted;
    std::optional<absl::Time> term_sent_at;
    bool killed;
    {
      absl::MutexLock lock(&mu_);
      child_exited_ = true;
      stopped = stop_ordered_;
      deleted = job_deleted_;
      term_sent_at = term_sent_at_;
      killed = kill_sent_;
      cv_.SignalAll();
    }
    progress.join();
    sampling_.reset();
    const int code = WIFEXITED(status)     ? WEXITSTATUS(status)
                     : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                           : 1;
    if (stopped) {
      const std::string how =
          term_sent_at.has_value() && *term_sent_at <= exited_at
              ? DescribeStoppedExit(status, killed, exited_at - *term_sent_at, options_.stop_grace)
              : absl::StrCat(DescribeExit(status), " before the stop order reached it");
      log_ << "debugplane-agent: the training command was stopped: " << how << "\n";
      // The job is Stopping; it is Stopped once the server has this report
      // (a deleted job has nobody to tell).
      if (!deleted) ReportEnd(Event::EVENT_STOPPED, how);
      return code;
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
             << options_.server << ": " << job_status.status() << "; not starting the command\n";
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
      log_ << "debugplane-agent: could not report the end of the training to " << options_.server
           << ": " << reported << "\n";
    }
  }

  pid_t Spawn() {
    std::vector<std::string> environment;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      absl::string_view text = *entry;
      if (absl::StartsWith(text, "SMDEBUG_CONFIG_FILE_PATH=") ||
          absl::StartsWith(text, "SMPROFILER_CONFIG_PATH=")) {
        continue;
      }
      environment.emplace_back(text);
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
      if (stop_ordered_) StopChildLocked();  // Ordered while starting.
    }
    return pid;
  }

  // SIGTERM to the command's group now, SIGKILL after the grace period.
  void StopChildLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (child_pid_ <= 0 || child_exited_ || killer_.joinable()) return;
    log_ << "debugplane-agent: stopping the training command: " << stop_reason_ << "\n";
    term_sent_at_ = absl::Now();
    kill(-child_pid_, SIGTERM);
    const pid_t pid = child_pid_;
    killer_ = std::thread([this, pid] {
      absl::MutexLock lock(&mu_);
      const absl::Time deadline = absl::Now() + options_.stop_grace;
      while (!child_exited_ && absl::Now() < deadline) cv_.WaitWithDeadline(&mu_, deadline);
      if (!child_exited_) {
        log_ << "debugplane-agent: the training command ignored SIGTERM for "
             << absl::FormatDuration(options_.stop_grace) << "; killing it\n";
        kill_sent_ = true;
        kill(-pid, SIGKILL);
      }
    });
  }

  void ForwardSignals() {
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    const timespec tick{0, 100 * 1000 * 1000};
    while (true) {
      const int signal_number = sigtimedwait(&signals, nullptr, &tick);
      absl::MutexLock lock(&mu_);
      if (child_exited_) return;
      if (signal_number > 0) kill(-child_pid_, signal_number);
    }
  }

  // Reports every new step seen in the tensor output.
  void ProgressLoop() {
    int64_t reported = -1;
    absl::MutexLock lock(&mu_);
    while (!child_exited_) {
      cv_.WaitWithTimeout(&mu_, options_.progress_interval);
      if (child_exited_) break;
      const std::string dir = tensor_dir_;
      mu_.Unlock();
      const int64_t step = NewestIndexedStep(dir);
      if (step > reported &&
          Report(Event::EVENT_PROGRESS, step, "", options_.progress_interval).ok()) {
        reported = step;
      }
      mu_.Lock();
    }
  }

  // Calls ReportTrainingStatus, retrying while the server is unreachable,
  // for up to `patience`. Returns the job's status after the report.
  // `message` is the FailureReason of EVENT_FAILED, the StatusMessage of
  // EVENT_STOPPED.
  absl::StatusOr<v1::TrainingJobStatus::Value> Report(Event::Event event,
                                                      std::optional<int64_t> step,
                                                      const std::string& message,
                                                      absl::Duration patience) {
    v1::ReportTrainingStatusRequest request;
    request.set_training_job_name(options_.job);
    request.set_event(event);
    if (step.has_value()) request.set_current_step(*step);
    if (event == Event::EVENT_STOPPED) {
      request.set_status_message(message);
    } else {
      request.set_failure_reason(message);
    }
    const absl::Time deadline = absl::Now() + patience;
    absl::Duration backoff = absl::Milliseconds(100);
    while (true) {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
      v1::ReportTrainingStatusResponse response;
      grpc::Status status = stub_->ReportTrainingStatus(&context, request, &response);
      if (status.ok()) return response.training_job_status();
      const bool retry = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
      if (!retry || absl::Now() + backoff > deadline) {
        return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                            status.error_message());
      }
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
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
    while (true) {
      auto context = std::make_shared<grpc::ClientContext>();
      {
        absl::MutexLock lock(&mu_);
        if (done_) return;
        stream_context_ = context;
      }
      std::unique_ptr<grpc::ClientReader<v1::ConnectAgentResponse>> reader =
          stub_->ConnectAgent(context.get(), request);
      v1::ConnectAgentResponse directive;
      while (reader->Read(&directive)) {
        if (lost) {
          log_ << "debugplane-agent: reconnected to " << options_.server << "\n";
          lost = false;
        }
        backoff = absl::Milliseconds(50);
        Apply(directive);
      }
      const grpc::Status status = reader->Finish();
      absl::MutexLock lock(&mu_);
      stream_context_ = nullptr;
      if (done_) return;
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
      connect_error_ = status.error_message();
      if (!lost) {
        log_ << "debugplane-agent: lost the connection to " << options_.server << " ("
             << status.error_message() << "); reconnecting, the training goes on\n";
        lost = true;
      }
      const absl::Time until = absl::Now() + backoff;
      while (!done_ && absl::Now() < until) cv_.WaitWithDeadline(&mu_, until);
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
  }

  // Applies one directive: config files, sampler, stop order.
  void Apply(const v1::ConnectAgentResponse& directive) {
    absl::MutexLock lock(&mu_);
    if (directive.config_version() > applied_version_) {
      if (applied_version_ == 0) ChooseDirectories(directive);
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
  }

  void ChooseDirectories(const v1::ConnectAgentResponse& directive)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const char* tmp = std::getenv("TMPDIR");
    const fs::path state =
        fs::path(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") / "debugplane-agent" / options_.job;
    auto pick = [&](const std::string& flag, const std::string& uri, const std::string& local,
                    const char* fallback) {
      if (!flag.empty()) return flag;
      if (std::string dir = LocalDirectory(uri); !dir.empty()) return dir;
      if (!local.empty()) return local;
      return (state / fallback).string();
    };
    tensor_dir_ = pick(options_.tensor_dir, directive.debug_hook_config().s3_output_path(),
                       directive.debug_hook_config().local_path(), "tensors");
    profiler_dir_ =
        pick(options_.profiler_dir, directive.profiler_config().s3_output_path(), "", "profiler");
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
  }

  const AgentOptions options_;
  std::ostream& log_;
  std::unique_ptr<v1::TrainingAgentService::Stub> stub_;

  absl::Mutex mu_;
  absl::CondVar cv_;  // Any change of the state below.
  int64_t applied_version_ ABSL_GUARDED_BY(mu_) = 0;
  bool done_connecting_ ABSL_GUARDED_BY(mu_) = false;  // Gave up: see connect_error_.
  std::string connect_error_ ABSL_GUARDED_BY(mu_) = "the server did not answer";
  bool stop_ordered_ ABSL_GUARDED_BY(mu_) = false;
  bool job_deleted_ ABSL_GUARDED_BY(mu_) = false;  // The stop order is the deletion.
  std::string stop_reason_ ABSL_GUARDED_BY(mu_);
  // When SIGTERM went to the command (unset: it exited before), and whether
  // SIGKILL followed after --stop-grace.
  std::optional<absl::Time> term_sent_at_ ABSL_GUARDED_BY(mu_);
  bool kill_sent_ ABSL_GUARDED_BY(mu_) = false;
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

int RunAgent(const AgentOptions& options, std::ostream& log) {
  Agent agent(options, log);
  return agent.Run();
}

int ParseAgentCommandLine(int argc, const char* const* argv, AgentOptions& options, bool& run,
                          std::ostream& out, std::ostream& err) {
  run = false;
  CLI::App app{"debugplane-agent: runs a training command as a monitored debugplane job"};
  app.require_subcommand(1);
  CLI::App* run_command = app.add_subcommand(
      "run", "Run COMMAND for job NAME: debugplane-agent run --job NAME -- COMMAND [ARGS...]");
  run_command->add_option("--server", options.server, "debugplane-server address (HOST:PORT)")
      ->envname("DEBUGPLANE_SERVER")
      ->capture_default_str();
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
  run_command->add_option("--node-id", options.node_id, "NodeId of the system metrics")
      ->capture_default_str();
  double stop_grace_s = absl::ToDoubleSeconds(options.stop_grace);
  run_command->add_option("--stop-grace", stop_grace_s, "Seconds between SIGTERM and SIGKILL")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
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
  run = true;
  return 0;
}

}  // namespace debugplane::client
