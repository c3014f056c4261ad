// Test helper: smdebug worker processes writing one trial, as the ranks of a
// torch.distributed job do with `include_workers: all`. Each is a real
// process (fork) with its own TrialWriter as worker_<rank> of `num_workers`
// (so its own collections file announcing num_workers), and writes
// training_job_end.ts in the trial root when its script returns, as every
// smdebug hook does when its process exits.
//
//   WorkerProcess rank1(trial, 1, 2, [](TrialWriter& w) { w.AddStep(0, ...); });
//   WorkerProcess rank0(trial, 0, 2, [&](TrialWriter& w) {
//     WaitForFile(trial + "/training_job_end.ts", absl::Seconds(30));  // rank 1 ended
//     w.AddStep(0, ...);
//   });
//   EXPECT_EQ(rank1.Wait(absl::Seconds(30)), 0);
//
// The script runs in the child only: it must not touch the parent's threads
// or locks (a TrialWriter, sleeping and looking at files are fine).

#ifndef DEBUGPLANE_TESTS_RULES_ENGINE_WORKER_PROCESSES_H_
#define DEBUGPLANE_TESTS_RULES_ENGINE_WORKER_PROCESSES_H_

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/rules_engine/trial_writer.h"
#include "tests/support/wait_until.h"

namespace debugplane::rules_engine::testing {

// True once `path` exists; false after `timeout`.
inline bool WaitForFile(const std::string& path, absl::Duration timeout) {
  return ::debugplane::testing::WaitUntil(
      [&] {
        std::error_code error;
        return std::filesystem::exists(path, error);
      },
      timeout);
}

class WorkerProcess {
 public:
  // Forks the worker: it runs `script` with its TrialWriter, writes
  // training_job_end.ts and exits 0 (1 if the script or a write failed).
  WorkerProcess(const std::string& trial, int rank, int num_workers,
                const std::function<void(TrialWriter&)>& script) {
    pid_ = fork();
    if (pid_ < 0) ADD_FAILURE() << "fork failed";
    if (pid_ != 0) return;
    // The child: gtest failures counted from here on are this worker's.
    const int failures_before = FailedParts();
    TrialWriter writer(trial, absl::StrCat("worker_", rank), num_workers);
    script(writer);
    writer.EndTraining();
    _exit(FailedParts() == failures_before ? 0 : 1);
  }
  ~WorkerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Its exit code once it exited, or -1 if it still runs after `timeout`.
  int Wait(absl::Duration timeout) {
    if (pid_ <= 0) return -1;
    int exit_code = -1;
    ::debugplane::testing::WaitUntil(
        [&] {
          int status = 0;
          if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
          pid_ = -1;
          exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          return true;
        },
        timeout);
    return exit_code;
  }

 private:
  static int FailedParts() {
    const ::testing::TestResult* result =
        ::testing::UnitTest::GetInstance()->current_test_info()->result();
    int failed = 0;
    for (int i = 0; i < result->total_part_count(); ++i) {
      failed += result->GetTestPartResult(i).failed() ? 1 : 0;
    }
    return failed;
  }

  pid_t pid_ = -1;
};

}  // namespace debugplane::rules_engine::testing

#endif  // DEBUGPLANE_TESTS_RULES_ENGINE_WORKER_PROCESSES_H_
