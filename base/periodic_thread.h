// PeriodicThread: a background thread that runs a pass at once and then
// every interval of a base::Clock's time, until shut down. Waits follow the
// clock (a FakeClock moved by a test wakes the thread at once).

#ifndef DEBUGPLANE_BASE_PERIODIC_THREAD_H_
#define DEBUGPLANE_BASE_PERIODIC_THREAD_H_

#include <cstdint>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"

namespace debugplane::base {

// Thread-safe.
class PeriodicThread {
 public:
  // `pass` runs on the thread: at once after Start, then `interval` (of
  // `clock`'s time) after the end of each pass. REQUIRES: `interval`
  // positive, `clock` not null.
  PeriodicThread(std::shared_ptr<Clock> clock, absl::Duration interval,
                 absl::AnyInvocable<void()> pass);
  // Shutdown().
  ~PeriodicThread();

  PeriodicThread(const PeriodicThread&) = delete;
  PeriodicThread& operator=(const PeriodicThread&) = delete;

  // Starts the thread. Call once; after Shutdown, a no-op.
  void Start();
  // Stops the thread: returns once a pass in progress has ended (passes can
  // ask stopping() to end early). Idempotent.
  void Shutdown();

  // Whether Shutdown has been called (for a long pass to cut itself short).
  bool stopping() const;

 private:
  void Loop();

  const std::shared_ptr<Clock> clock_;
  const absl::Duration interval_;
  absl::AnyInvocable<void()> pass_;
  mutable absl::Mutex mu_;
  absl::CondVar wake_;  // Signalled on Shutdown and on a jump of the clock.
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t jump_listener_ = 0;  // Set by Start.
  std::thread thread_;
};

}  // namespace debugplane::base

#endif  // DEBUGPLANE_BASE_PERIODIC_THREAD_H_
