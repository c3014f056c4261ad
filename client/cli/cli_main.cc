// The `debugplane` command; everything but the process boundary is in cli.cc.
#include <iostream>

#include "absl/synchronization/mutex.h"
#include "client/cli/cli.h"

int main(int argc, char** argv) {
  // Debian's abseil ships with absl::Mutex deadlock detection on: a graph
  // update on every lock, here and inside gRPC. A short-lived CLI gains
  // nothing from it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return debugplane::client::RunCli(argc, argv, std::cout, std::cerr);
}
