// The agent's child process: the training command, started in its own
// process group, ended by a signal with SIGKILL after a grace period, and
// waited for. Also how its end reads to a person.

#ifndef DEBUGPLANE_CLIENT_AGENT_TRAINING_PROCESS_H_
#define DEBUGPLANE_CLIENT_AGENT_TRAINING_PROCESS_H_

#include <sys/types.h>

#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"

namespace debugplane::client {

// How the training command ended.
struct TrainingExit {
  int wait_status = 0;  // As from waitpid.
  absl::Time exited_at;
  // When the first terminating signal went to the command (unset: it
  // exited before any), and whether SIGKILL followed after the grace period.
  std::optional<absl::Time> terminate_sent_at;
  bool killed_after_grace = false;

  // The exit code, or 128 + the signal that ended it; 1 otherwise.
  int ExitCode() const;
  // Whether a terminating signal was sent before the command exited.
  bool SignalReachedIt() const;
  // Whether it exited with code 0.
  bool Succeeded() const;
};

// How a command ended by itself, e.g. "the training command exited with
// code 3" or "the training command was killed by signal 9 (Killed)".
std::string DescribeExit(int wait_status);

// How a command stopped by the agent ended, for the Stopped transition's
// StatusMessage: `wait_status` as from waitpid, `killed_after_grace` if the
// agent sent SIGKILL after `stop_grace`, `since_stop_order` from SIGTERM to
// the exit. E.g. "the training command exited with code 0 after SIGTERM
// (signal 15), 0.4 s after the stop order".
std::string DescribeStoppedExit(int wait_status, bool killed_after_grace,
                                absl::Duration since_stop_order, absl::Duration stop_grace);

// How a command ended after the agent passed on `agent_signal` (SIGTERM or
// SIGINT sent to the agent), for the EVENT_FAILED FailureReason, as
// DescribeStoppedExit. E.g. "debugplane-agent received SIGTERM (signal 15)
// and passed it on to the training command, which was ended by signal 15
// (Terminated) 0.0 s later".
std::string DescribeExitAfterAgentSignal(int agent_signal, int wait_status, bool killed_after_grace,
                                         absl::Duration since_signal, absl::Duration stop_grace);

// The environment of the training command: the agent's `environment`
// ("NAME=value" entries) without DEBUGPLANE_TOKEN (the agent's key is for
// the agent alone) and without the configuration paths, which are set to
// `hook_config_path` (SMDEBUG_CONFIG_FILE_PATH) and `profiler_config_path`
// (SMPROFILER_CONFIG_PATH); DP_TRAINING_JOB_NAME is `job`. A non-empty
// `tensorboard_dir` (the job's TensorBoard logs) is DP_TENSORBOARD_DIR, the
// name a script passes to SummaryWriter or Lightning's TensorBoardLogger,
// and TENSORBOARD_LOGGING_DIR, which Hugging Face's Trainer reads; values
// of these the agent inherited do not reach the command then.
std::vector<std::string> TrainingEnvironment(const char* const* environment,
                                             const std::string& hook_config_path,
                                             const std::string& profiler_config_path,
                                             const std::string& job,
                                             const std::string& tensorboard_dir);

// One run of the training command. Thread-safe; Start and Wait are called
// once each, by one thread, in that order.
class TrainingProcess {
 public:
  // `clock` and `log` must outlive this object. `stop_grace` is the time
  // between a terminating signal and SIGKILL.
  TrainingProcess(base::Clock& clock, absl::Duration stop_grace, std::ostream& log);
  // Waits for the SIGKILL timer, if one runs (it ends once Wait returned).
  ~TrainingProcess();
  TrainingProcess(const TrainingProcess&) = delete;
  TrainingProcess& operator=(const TrainingProcess&) = delete;

  // Forks and executes `command` (argv[0] looked up in PATH) with
  // `environment`, in a process group of its own, with no signal blocked.
  // Returns the fork's error (strerror's text) if there is no child; an exec that
  // fails makes the child exit with 127.
  absl::Status Start(const std::vector<std::string>& command,
                     const std::vector<std::string>& environment);

  // Sends `signal_number` to the command's process group now and SIGKILL
  // if it has not exited `stop_grace` later; logs `why`. A no-op before
  // Start, after the exit and once a termination is under way.
  void Terminate(int signal_number, const std::string& why);

  // Sends `signal_number` to the command's process group while it runs.
  void PassOn(int signal_number);

  // Whether the command was started and has not exited.
  bool Running() const;

  // Waits for the command to exit. REQUIRES: Start succeeded.
  TrainingExit Wait();

 private:
  base::Clock& clock_;
  const absl::Duration stop_grace_;
  std::ostream& log_;

  mutable absl::Mutex mu_;
  absl::CondVar exited_;  // Signalled when exit_ is set.
  pid_t pid_ ABSL_GUARDED_BY(mu_) = -1;
  std::optional<TrainingExit> exit_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Time> terminate_sent_at_ ABSL_GUARDED_BY(mu_);
  bool kill_sent_ ABSL_GUARDED_BY(mu_) = false;
  std::thread killer_ ABSL_GUARDED_BY(mu_);  // Sends SIGKILL after stop_grace_.
};

}  // namespace debugplane::client

#endif  // DEBUGPLANE_CLIENT_AGENT_TRAINING_PROCESS_H_
