// What the agent tells the server about the training, besides its start:
// the newest step (progress) and how the training ended.

#ifndef DEBUGPLANE_CLIENT_AGENT_TRAINING_REPORTS_H_
#define DEBUGPLANE_CLIENT_AGENT_TRAINING_REPORTS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "client/agent/training_process.h"
#include "debugplane/v1/training_agent.pb.h"

namespace debugplane::client {

// The newest global step in a trial's index under `tensor_dir`
// (…/index/<n>/<step>_<worker>.json), or -1. Only the last index directory
// is listed.
int64_t NewestIndexedStep(const std::string& tensor_dir);

// What ended the training, besides the command itself.
struct EndCause {
  bool stop_ordered = false;
  bool job_deleted = false;  // The stop order is the deletion.
  int agent_signal = 0;      // The first SIGTERM / SIGINT sent to the agent (0: none).
};

// The end of the training as the agent reports and logs it.
struct EndReport {
  // The event to report with `message`; nullopt: nobody to tell (a deleted
  // job).
  std::optional<v1::ReportTrainingStatusRequest::Event> event;
  std::string message;
  std::string log_line;  // "" for nothing to log.
  int exit_code = 0;     // The agent's.
};

// How the training that ended with `exit` for `cause` is reported:
// - after a signal to the agent (not a stop order): EVENT_FAILED saying
//   so, exit code 128 + the signal;
// - after a stop order: EVENT_STOPPED saying how it ended (no report for a
//   deleted job), the command's exit code (128 + the agent's signal if one
//   came too);
// - else EVENT_COMPLETED for exit code 0, EVENT_FAILED with the code or
//   signal otherwise, and the command's exit code.
// `stop_grace` is the time between SIGTERM and SIGKILL, for the messages.
EndReport DescribeTrainingEnd(const TrainingExit& exit, const EndCause& cause,
                              absl::Duration stop_grace);

}  // namespace debugplane::client

#endif  // DEBUGPLANE_CLIENT_AGENT_TRAINING_REPORTS_H_
