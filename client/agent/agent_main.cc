// The `debugplane-agent` command; everything but the process boundary is in
// agent.cc.
#include <iostream>

#include "absl/synchronization/mutex.h"
#include "client/agent/agent.h"
#include "client/agent/agent_signals.h"

int main(int argc, char** argv) {
  // Before anything can start a thread: every thread inherits the mask, so
  // SIGTERM / SIGINT reach only the agent's signal thread, which ends the
  // training before the agent exits (client/agent/agent_signals.h).
  debugplane::client::BlockAgentStopSignals();
  // Debian's abseil ships with absl::Mutex deadlock detection on; the agent
  // does not pay for it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  debugplane::client::AgentOptions options;
  bool run = false;
  const int code =
      debugplane::client::ParseAgentCommandLine(argc, argv, options, run, std::cout, std::cerr);
  if (!run) return code;
  return debugplane::client::RunAgent(options, std::cerr);
}
