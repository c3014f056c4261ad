#include "client/agent/agent_signals.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace debugplane::client {

sigset_t AgentStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  return signals;
}

sigset_t BlockAgentStopSignals() {
  const sigset_t signals = AgentStopSignals();
  sigset_t previous;
  pthread_sigmask(SIG_BLOCK, &signals, &previous);
  return previous;
}

int WaitForAgentStopSignal(absl::Duration timeout) {
  const sigset_t signals = AgentStopSignals();
  const timespec wait = absl::ToTimespec(timeout);
  const int signal_number = sigtimedwait(&signals, nullptr, &wait);
  return signal_number > 0 ? signal_number : 0;  // EAGAIN (timeout) or EINTR: none.
}

std::string SignalName(int signal_number) {
  switch (signal_number) {
    case SIGTERM:
      return "SIGTERM (signal 15)";
    case SIGINT:
      return "SIGINT (signal 2)";
    case SIGKILL:
      return "SIGKILL (signal 9)";
    default:
      return absl::StrCat("signal ", signal_number, " (", strsignal(signal_number), ")");
  }
}

}  // namespace debugplane::client
