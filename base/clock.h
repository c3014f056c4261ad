// Clock: the time as the server's lifecycle logic sees it (timestamps,
// MaxRuntimeInSeconds, how long a stop waits), behind an interface so that
// tests move a FakeClock instead of sleeping.
//
// A thread that waits for a clock to reach a time sleeps for at most
// RealTimeUntil(time) of real time, and registers a jump listener that wakes
// it when the clock is moved by hand (DeadlineTimer does both).

#ifndef DEBUGPLANE_BASE_CLOCK_H_
#define DEBUGPLANE_BASE_CLOCK_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace debugplane::base {

class Clock {
 public:
  virtual ~Clock() = default;

  // The current time. Thread-safe.
  virtual absl::Time Now() const = 0;

  // How long, in real time, a thread waiting for this clock to read
  // `deadline` should sleep before it looks again: the time left for the
  // system clock; forever for a clock that moves only when told (it wakes
  // its waiters through their jump listeners). Thread-safe.
  virtual absl::Duration RealTimeUntil(absl::Time deadline) const = 0;

  // Calls `listener` after every jump of this clock (a FakeClock moved by a
  // test), on the thread that moved it, outside the clock's state lock; the
  // listener must not block and must not add or remove listeners. The system
  // clock never jumps. Returns an id for RemoveJumpListener. Thread-safe.
  virtual int64_t AddJumpListener(std::function<void()> listener) = 0;

  // When it returns, the listener is not running and will not be called
  // again. Unknown ids are ignored. Thread-safe.
  // REQUIRES: not called from inside a listener.
  virtual void RemoveJumpListener(int64_t id) = 0;
};

// The system clock (absl::Now()). The same object on every call.
std::shared_ptr<Clock> SystemClock();

// A clock that moves only when told, for tests. Thread-safe.
class FakeClock final : public Clock {
 public:
  // Starts at `start` (a fixed date by default, so that runs repeat).
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1700000000));

  absl::Time Now() const override;
  absl::Duration RealTimeUntil(absl::Time deadline) const override;
  int64_t AddJumpListener(std::function<void()> listener) override;
  void RemoveJumpListener(int64_t id) override;

  // Moves the clock forward by `delta` (a negative delta is ignored), then
  // calls every jump listener.
  void Advance(absl::Duration delta);

 private:
  // Nanoseconds since the Unix epoch. Atomic rather than locked: Now() is
  // called under other locks (a DeadlineTimer's), and a listener takes them.
  std::atomic<int64_t> now_ns_;
  // Held (shared) while listeners run, so that RemoveJumpListener waits for
  // a call in flight.
  absl::Mutex listeners_mu_;
  std::map<int64_t, std::function<void()>> listeners_ ABSL_GUARDED_BY(listeners_mu_);
  int64_t next_listener_id_ ABSL_GUARDED_BY(listeners_mu_) = 1;
};

}  // namespace debugplane::base

#endif  // DEBUGPLANE_BASE_CLOCK_H_
