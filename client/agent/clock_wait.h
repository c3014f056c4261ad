// Waiting on a condition variable until a base::Clock reads a deadline.

#ifndef DEBUGPLANE_CLIENT_AGENT_CLOCK_WAIT_H_
#define DEBUGPLANE_CLIENT_AGENT_CLOCK_WAIT_H_

#include <algorithm>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"

namespace debugplane::client {

// How often a waiter looks at a clock that does not move by itself (a
// FakeClock advanced by a test), which registers no jump listener here.
inline constexpr absl::Duration kClockPollInterval = absl::Milliseconds(100);

// Waits on `cv` (with `mu` held) until it is signalled or `clock` reads
// `deadline`, for at most kClockPollInterval of real time at once. Returns
// whether `clock` reads `deadline` or later. Callers loop on their own
// condition, as with absl::CondVar::WaitWithDeadline.
inline bool WaitOnClock(absl::CondVar& cv, absl::Mutex& mu, base::Clock& clock,
                        absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
  if (clock.Now() >= deadline) return true;
  cv.WaitWithTimeout(&mu, std::min(clock.RealTimeUntil(deadline), kClockPollInterval));
  return clock.Now() >= deadline;
}

}  // namespace debugplane::client

#endif  // DEBUGPLANE_CLIENT_AGENT_CLOCK_WAIT_H_
