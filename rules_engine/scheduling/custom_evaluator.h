// CustomEvaluatorRunner: runs custom rule evaluators (a DebugRuleConfiguration
// whose RuleEvaluatorImage names a local command the server allows) as
// subprocesses and turns how they end into a RuleVerdict.
//
// The contract with an evaluator program:
//   - It is started with the argv and environment of its CustomEvaluation
//     (see CustomEvaluatorEnvironment for the variables the server sets),
//     stdin from /dev/null, stdout and stderr into one pipe, in a process
//     group of its own, with every other file descriptor of the server closed.
//   - Exit code 0: NoIssuesFound. Exit code kEvaluatorExitIssuesFound (10):
//     IssuesFound, and its last output lines say what it found. Any other
//     exit code, or death by a signal: Error, with its last output lines.
//   - Stop (Cancel) and the time limit send SIGTERM to its whole process
//     group, then SIGKILL after a grace period. When the evaluator itself
//     exits, whatever it left running in its process group is killed.
//
// One supervisor thread serves every evaluator: each child is watched through
// a pidfd and its output pipe in one poll() loop, so thousands of rules cost
// no threads. Only the last lines of output are kept (bounded memory whatever
// an evaluator prints).

#ifndef DEBUGPLANE_RULES_ENGINE_SCHEDULING_CUSTOM_EVALUATOR_H_
#define DEBUGPLANE_RULES_ENGINE_SCHEDULING_CUSTOM_EVALUATOR_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rules_engine/rule/rule.h"
#include "rules_engine/scheduling/evaluator_output.h"

struct pollfd;

namespace debugplane::rules_engine {

// The exit code with which an evaluator reports IssuesFound. 10 rather than 1
// or 2: those are what interpreters and shells exit with on their own errors
// (an uncaught Python exception exits 1, a shell usage error 2), which must
// read as Error, not as a finding. 10 is unused by sh, bash, Python and the
// sysexits.h range (64-78), and below the 126+ codes shells use for
// "cannot execute" and signals.
inline constexpr int kEvaluatorExitIssuesFound = 10;

// Environment variables the server gives an evaluator, by convention (the
// evaluator's documentation for its authors):
//   DP_TRAINING_JOB_NAME        the training job's name
//   DP_RULE_CONFIGURATION_NAME  the rule's RuleConfigurationName
//   DP_TRIAL_PATH               the local trial directory (absolute; the
//                               smdebug output of DebugHookConfig)
//   DP_RULE_PARAMETERS          every RuleParameters entry as one JSON object
//                               of strings, e.g. {"threshold":"20.0"}
//   DP_RULE_PARAM_<NAME>        each parameter on its own; <NAME> is the
//                               parameter's name with every character other
//                               than [A-Za-z0-9_] replaced by '_' (case kept),
//                               e.g. DP_RULE_PARAM_threshold=20.0
//   DP_ISSUES_FOUND_EXIT_CODE   "10" (kEvaluatorExitIssuesFound)
// Parameters are never set under their own names: a client could otherwise
// set LD_PRELOAD, PATH or PYTHONPATH of a process the server runs.
// Returns the map for CustomEvaluation::environment. Thread-safe (pure).
std::map<std::string, std::string> CustomEvaluatorEnvironment(
    const std::string& training_job_name, const std::string& rule_configuration_name,
    const std::string& trial_path, const RuleParameters& parameters);

// One evaluator process to run.
struct CustomEvaluation {
  // argv[0] is the absolute path of the executable (no PATH search: the
  // server's configuration decides which programs may run); the rest are its
  // arguments.
  std::vector<std::string> argv;
  // Set in the child on top of a minimal base: PATH, HOME and LANG as the
  // server had them when the runner was created (PATH defaults to
  // /usr/local/bin:/usr/bin:/bin). Nothing else of the server's environment
  // reaches the child. Entries here override the base.
  std::map<std::string, std::string> environment;
  // The child's working directory; empty: the server's.
  std::string working_directory;
  // From the moment the process starts (time spent queued does not count).
  // absl::InfiniteDuration(): no limit.
  absl::Duration time_limit = absl::Hours(24);
  // Says what runs, e.g. "rule 'MyRule' of job 'j1'", for log lines.
  std::string description;
};

// How an evaluation ended.
struct CustomEvaluationResult {
  // kNoIssuesFound, kIssuesFound or kError (never kContinue); details at most
  // kEvaluatorMaxDetails bytes of valid UTF-8:
  //   exit 0: the last non-blank output line, else "evaluator exited 0";
  //   exit kEvaluatorExitIssuesFound: the last output lines (the newest that
  //     fit, oldest first);
  //   other exit codes / signals: "evaluator exited with code 3" /
  //     "evaluator killed by signal 11 (SIGSEGV)", then the last lines;
  //   exec failure: "cannot run evaluator <path>: <errno text>";
  //   time limit: "evaluator killed after <limit> (its time limit)", then the
  //     last lines;
  //   cancelled: "evaluator stopped", then the last lines (callers normally
  //     record Stopped and ignore the verdict).
  RuleVerdict verdict;
  // Cancel() or Shutdown() ended it (even if the process then exited 0).
  bool cancelled = false;
  // The exit code when the process exited; -1 if it was killed by a signal
  // or never started.
  int exit_code = -1;
  // The signal that killed the process; 0 if it exited or never started.
  int term_signal = 0;
};

// Runs evaluator processes on one supervisor thread.
//
// Thread-safety: Start and Cancel may be called from any thread,
// concurrently. Shutdown (and the destructor) may be called from any thread
// but the runner's own (i.e. not from a `done` callback).
//
// Children are reaped by this runner only: the process must not set SIGCHLD
// to SIG_IGN nor call wait()/waitpid(-1) elsewhere.
class CustomEvaluatorRunner {
 public:
  struct Options {
    // Evaluators running at once; more are queued (first come, first served).
    // Values below 1 mean 1.
    int max_concurrent = 16;
    // Non-blank output lines kept per process for the verdict's details.
    int output_tail_lines = 20;
    // Time between SIGTERM and SIGKILL on Cancel, Shutdown and time limit.
    absl::Duration kill_grace = absl::Seconds(5);
    // Watch exits through pidfds. Without them (or where pidfd_open fails:
    // Linux before 5.3) the loop checks for exits every 20ms instead. False
    // only to test that fallback.
    bool use_pidfd = true;
  };

  // Starts the supervisor thread.
  explicit CustomEvaluatorRunner(Options options);
  // Shutdown().
  ~CustomEvaluatorRunner();

  CustomEvaluatorRunner(const CustomEvaluatorRunner&) = delete;
  CustomEvaluatorRunner& operator=(const CustomEvaluatorRunner&) = delete;

  // Starts the process, or queues it while max_concurrent others run.
  // Returns its id (> 0), for Cancel.
  //
  // `done` runs exactly once with the result, on the runner's thread, never
  // inline in Start (so callers may hold their own locks while calling Start
  // and take them in `done`). It must not block: every other evaluator waits
  // while it runs. It may call Start and Cancel, not Shutdown.
  // Problems with the evaluation itself (empty argv, relative path, missing
  // or non-executable file, bad environment name) are reported through
  // `done` as kError, not by Start.
  //
  // REQUIRES: Shutdown() has not been called. (If it has, returns 0 and
  // destroys `done` without calling it; a warning is logged.)
  uint64_t Start(CustomEvaluation evaluation,
                 absl::AnyInvocable<void(CustomEvaluationResult) &&> done);

  // Stops evaluation `id`: a queued one never starts; a running one gets
  // SIGTERM on its process group, then SIGKILL after kill_grace. Its `done`
  // gets cancelled=true once the process is gone. Returns at once (does not
  // wait for the process). Unknown or finished id: no-op; an evaluation that
  // ends on its own before the supervisor sees the Cancel reports that ending
  // (cancelled=false): callers racing Cancel with completion get one of the
  // two, exactly once.
  void Cancel(uint64_t id);

  // Sends SIGTERM to every running evaluator (SIGKILL after kill_grace), runs
  // every pending `done` with cancelled=true, and joins the thread: returns
  // when every process has been reaped and every `done` has returned (about
  // kill_grace at most, if a process ignores SIGTERM). Idempotent; concurrent
  // callers all return after the first one completes.
  void Shutdown();

 private:
  struct Process;

  // Wakes the supervisor's poll().
  void Wake();
  // An entry of the poll set after the eventfd: its process and whether it
  // is the output pipe (else the pidfd).
  struct PollOwner {
    Process* process;
    bool is_output;
  };

  // The supervisor thread: takes requests, starts queued evaluations, checks
  // time limits, polls, reads output and finishes exited processes, in turn.
  void Loop();
  // Fills `fds` (the eventfd, then each running process's pipe and pidfd)
  // and `owners`; returns poll()'s timeout: until the next deadline, at most
  // the fallback tick where an exit or a wake-up cannot be polled for.
  int WatchRunning(std::vector<pollfd>& fds, std::vector<PollOwner>& owners);
  // Consumes the wake-up, reads output and notes pidfds that fired.
  void HandlePollEvents(const std::vector<pollfd>& fds, const std::vector<PollOwner>& owners);
  // Reaps the processes that exited, drains their output and runs `done`.
  void FinishExited();
  // The result for a reaped `process` (its verdict as CustomEvaluationResult
  // documents).
  static CustomEvaluationResult Outcome(const Process& process);
  // Supervisor-thread helpers (touch the supervisor-only state below).
  void TakeRequests(bool& stopping);
  void StartQueued();
  void Launch(std::unique_ptr<Process> process);
  void Terminate(Process& process, bool cancelled);
  void CheckDeadlines();
  void ReadOutput(Process& process, bool drain);
  // Reaps `process` if it has exited; true if it has.
  bool ReapIfExited(Process& process);
  void Finish(std::unique_ptr<Process> process, CustomEvaluationResult result);

  const Options options_;
  // PATH, HOME and LANG of the server at construction time.
  const std::vector<std::pair<std::string, std::string>> base_environment_;
  // eventfd: Start, Cancel and Shutdown write to it to wake poll(); -1 if
  // eventfd failed (the loop then polls every few milliseconds).
  int wake_fd_ = -1;

  absl::Mutex mu_;
  // Signalled when the supervisor thread has been joined.
  absl::CondVar joined_cv_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Started, not yet seen by the supervisor.
  std::vector<std::unique_ptr<Process>> submitted_ ABSL_GUARDED_BY(mu_);
  // Cancelled, not yet seen by the supervisor.
  std::vector<uint64_t> cancel_requests_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool joined_ ABSL_GUARDED_BY(mu_) = false;

  // Owned by the supervisor thread alone (no lock): evaluations waiting for a
  // slot, in order, and the running ones by id.
  std::deque<std::unique_ptr<Process>> queued_;
  std::map<uint64_t, std::unique_ptr<Process>> running_;

  std::thread supervisor_;
};

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_SCHEDULING_CUSTOM_EVALUATOR_H_
