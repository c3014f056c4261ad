// The process side of the custom evaluator runner (custom_evaluator.h):
// starting an evaluator with posix_spawn (its pipe, environment, process
// group and default signals), signalling its process group, reading its
// output and reaping it. Free functions over pids and file descriptors; the
// runner keeps the state and decides when to call them. Exposed for the
// runner only (namespace internal).

#ifndef DEBUGPLANE_RULES_ENGINE_SCHEDULING_EVALUATOR_PROCESS_H_
#define DEBUGPLANE_RULES_ENGINE_SCHEDULING_EVALUATOR_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "rules_engine/scheduling/custom_evaluator.h"
#include "rules_engine/scheduling/evaluator_output.h"

namespace debugplane::rules_engine::internal {

// The text of errno value `error`, not localized ("No such file or
// directory"), or "errno <n>" for an unknown one. Thread-safe, unlike
// strerror().
std::string ErrnoText(int error);

// "11 (SIGSEGV)", or just the number for an unknown signal.
std::string SignalText(int signal);

// The environment every evaluator starts from: PATH (default
// /usr/local/bin:/usr/bin:/bin), HOME and LANG as this process has them now.
std::vector<std::pair<std::string, std::string>> EvaluatorBaseEnvironment();

// A started evaluator.
struct SpawnedEvaluator {
  pid_t pid = -1;
  // The read end of its stdout+stderr pipe, non-blocking and close-on-exec;
  // the caller closes it.
  int output_fd = -1;
};

// Starts `evaluation` as CustomEvaluatorRunner's contract says: argv[0] an
// absolute path (no PATH search), `base_environment` overridden by
// evaluation.environment, stdin from /dev/null, stdout and stderr into one
// new pipe, in its working directory, in a process group of its own, with
// every signal at its default and unblocked, and no descriptor of this
// process but 0-2 open. On failure (no command, relative path, invalid
// environment name, pipe or spawn failure) returns an error whose message is
// the verdict's details, e.g. "cannot run evaluator /x: No such file or
// directory". Thread-safe.
absl::StatusOr<SpawnedEvaluator> SpawnEvaluator(
    const CustomEvaluation& evaluation,
    const std::vector<std::pair<std::string, std::string>>& base_environment);

// A pidfd (close-on-exec) that becomes readable when child `pid` exits, or
// -1 with errno set (Linux before 5.3). REQUIRES: `pid` is an unreaped child
// of this process (so that its pid cannot have been reused).
int OpenPidfd(pid_t pid);

// Sends `signal` to the process group of `pid` (the evaluator and whatever
// it started), or to `pid` alone if it left its group.
void SignalGroup(pid_t pid, int signal);

// Appends to `tail` what the non-blocking pipe *output_fd holds, at most
// `max_reads` reads of 64 KiB. At EOF (every writer gone) or on an error,
// closes *output_fd and sets it to -1. No-op when *output_fd is -1.
void ReadAvailableOutput(int* output_fd, int max_reads, OutputTail& tail);

// What ReapIfExited found.
struct ExitCheck {
  enum State {
    kRunning,         // Not exited yet.
    kExited,          // Exited and reaped: see wait_status.
    kReapedElsewhere  // Gone, reaped by someone else: see error (an errno).
  };
  State state = kRunning;
  int wait_status = 0;
  int error = 0;
};

// If child `pid` has exited: kills whatever it left running in its process
// group (while the pid, the group's id, is still reserved), then reaps it.
// Never blocks on a running child.
ExitCheck ReapIfExited(pid_t pid);

}  // namespace debugplane::rules_engine::internal

#endif  // DEBUGPLANE_RULES_ENGINE_SCHEDULING_EVALUATOR_PROCESS_H_
