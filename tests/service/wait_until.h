// Polling for a condition that another process makes true (the real server,
// the agent, a training command): end-to-end tests cannot advance those
// processes' clocks, so they poll against a wall-clock deadline.

#ifndef DEBUGPLANE_TESTS_SERVICE_WAIT_UNTIL_H_
#define DEBUGPLANE_TESTS_SERVICE_WAIT_UNTIL_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace debugplane::testing {

// Calls `done()` every 20 ms until it returns true (then returns true) or
// `timeout` has passed (then returns false; the caller asserts and says
// what it was waiting for).
template <typename Predicate>
bool WaitUntil(Predicate done, absl::Duration timeout = absl::Seconds(30)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

}  // namespace debugplane::testing

#endif  // DEBUGPLANE_TESTS_SERVICE_WAIT_UNTIL_H_
