// The signals that end the agent (SIGTERM, SIGINT) and how one thread takes
// them.
//
// A signal sent to a process goes to any thread that does not block it; with
// the default action, SIGTERM then ends the whole agent at once and leaves
// the training command (in its own process group) running as an orphan. So
// `main` blocks both signals before any thread starts (gRPC's, a pool's):
// every thread inherits the mask, none can take them, and one thread of the
// agent receives them with WaitForAgentStopSignal and stops the training.

#ifndef DEBUGPLANE_CLIENT_AGENT_AGENT_SIGNALS_H_
#define DEBUGPLANE_CLIENT_AGENT_AGENT_SIGNALS_H_

#include <signal.h>

#include <string>

#include "absl/time/time.h"

namespace debugplane::client {

// {SIGTERM, SIGINT}.
sigset_t AgentStopSignals();

// Blocks AgentStopSignals() in the calling thread, and so in every thread it
// starts afterwards. Returns the previous mask. Call it first thing in
// `main`, before anything can start a thread.
sigset_t BlockAgentStopSignals();

// Waits up to `timeout` for SIGTERM or SIGINT sent to the process and takes
// it. Returns the signal number, or 0 if none came. REQUIRES: both are
// blocked in every thread of the process (else another thread may get it).
int WaitForAgentStopSignal(absl::Duration timeout);

// "SIGTERM (signal 15)"; "signal N (<description>)" for others.
std::string SignalName(int signal_number);

}  // namespace debugplane::client

#endif  // DEBUGPLANE_CLIENT_AGENT_AGENT_SIGNALS_H_
