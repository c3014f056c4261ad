// WakeOnJumps: how a thread that waits on a condition variable for a Clock
// to reach a time hears that the clock was moved by hand (a FakeClock in a
// test), so that it looks at the time again at once.

#ifndef DEBUGPLANE_BASE_CLOCK_WAKE_H_
#define DEBUGPLANE_BASE_CLOCK_WAKE_H_

#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "base/clock.h"

namespace debugplane::base {

// Registers a jump listener of `clock` that signals every waiter of `cv`
// under `mu`. Returns its id, for clock.RemoveJumpListener (call it before
// `mu` and `cv` go). REQUIRES: `mu` not held by the caller (a listener added
// now may run at once and take it).
int64_t WakeOnJumps(Clock& clock, absl::Mutex& mu, absl::CondVar& cv);

}  // namespace debugplane::base

#endif  // DEBUGPLANE_BASE_CLOCK_WAKE_H_
