#include "base/clock_wake.h"

namespace debugplane::base {

int64_t WakeOnJumps(Clock& clock, absl::Mutex& mu, absl::CondVar& cv) {
  return clock.AddJumpListener([&mu, &cv] {
    absl::MutexLock lock(&mu);
    cv.SignalAll();
  });
}

}  // namespace debugplane::base
