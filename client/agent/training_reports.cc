#include "client/agent/training_reports.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/agent/agent_signals.h"

namespace debugplane::client {
namespace {

using Event = v1::ReportTrainingStatusRequest;

// After a signal to the agent that was no stop order: the job ends as
// Failed, saying the agent was signalled (a service manager's stop,
// Ctrl-C), and the agent's exit code says so too.
EndReport EndAfterAgentSignal(const TrainingExit& exit, int agent_signal,
                              absl::Duration stop_grace) {
  const std::string how =
      exit.SignalReachedIt()
          ? DescribeExitAfterAgentSignal(agent_signal, exit.wait_status, exit.killed_after_grace,
                                         exit.exited_at - *exit.terminate_sent_at, stop_grace)
          : absl::StrCat(DescribeExit(exit.wait_status), " before ", SignalName(agent_signal),
                         " to debugplane-agent reached it");
  return {.event = Event::EVENT_FAILED,
          .message = how,
          .log_line = absl::StrCat("debugplane-agent: ", how),
          .exit_code = 128 + agent_signal};
}

// After a stop order: the job is Stopping; it is Stopped once the server
// has this report (a deleted job has nobody to tell).
EndReport EndAfterStopOrder(const TrainingExit& exit, const EndCause& cause,
                            absl::Duration stop_grace) {
  const std::string how =
      exit.SignalReachedIt()
          ? DescribeStoppedExit(exit.wait_status, exit.killed_after_grace,
                                exit.exited_at - *exit.terminate_sent_at, stop_grace)
          : absl::StrCat(DescribeExit(exit.wait_status), " before the stop order reached it");
  EndReport report{.message = how,
                   .log_line = absl::StrCat("debugplane-agent: the training command was stopped: ",
                                            how),
                   .exit_code = cause.agent_signal != 0 ? 128 + cause.agent_signal
                                                        : exit.ExitCode()};
  if (!cause.job_deleted) report.event = Event::EVENT_STOPPED;
  return report;
}

}  // namespace

int64_t NewestIndexedStep(const std::string& tensor_dir) {
  namespace fs = std::filesystem;
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

EndReport DescribeTrainingEnd(const TrainingExit& exit, const EndCause& cause,
                              absl::Duration stop_grace) {
  if (cause.agent_signal != 0 && !cause.stop_ordered) {
    return EndAfterAgentSignal(exit, cause.agent_signal, stop_grace);
  }
  if (cause.stop_ordered) return EndAfterStopOrder(exit, cause, stop_grace);
  return {.event = exit.Succeeded() ? Event::EVENT_COMPLETED : Event::EVENT_FAILED,
          .message = exit.Succeeded() ? "" : DescribeExit(exit.wait_status),
          .exit_code = exit.ExitCode()};
}

}  // namespace debugplane::client
