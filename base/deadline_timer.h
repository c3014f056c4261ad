// DeadlineTimer: one thread that calls back when keyed deadlines pass, by a
// Clock (so that tests advance a FakeClock instead of sleeping).
//
// Each key has at most one deadline; setting it again replaces it. The
// callback runs on the timer's thread, outside the timer's lock, once per
// passed deadline, earliest first; a deadline already passed when it is set
// fires at once. Callbacks of one timer never overlap. The job manager keys
// deadlines by job name (MaxRuntimeInSeconds, the end of a stop's wait).

#ifndef DEBUGPLANE_BASE_DEADLINE_TIMER_H_
#define DEBUGPLANE_BASE_DEADLINE_TIMER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"

namespace debugplane::base {

class DeadlineTimer {
 public:
  // Called with the key whose deadline passed. It may call Set and Cancel;
  // it must not call Shutdown or destroy the timer.
  using Callback = std::function<void(const std::string& key)>;

  // Starts the thread.
  DeadlineTimer(std::shared_ptr<Clock> clock, Callback on_deadline);

  // Shuts down (see Shutdown).
  ~DeadlineTimer();

  DeadlineTimer(const DeadlineTimer&) = delete;
  DeadlineTimer& operator=(const DeadlineTimer&) = delete;

  // Sets the deadline of `key`, replacing the one it had. Thread-safe; does
  // not wait for a callback in flight. Ignored after Shutdown.
  void Set(const std::string& key, absl::Time deadline);

  // Removes the deadline of `key`, if any. Thread-safe. A callback for it
  // already running is not interrupted.
  void Cancel(const std::string& key);

  // The pending deadline of `key`, if any (for diagnostics and tests).
  std::optional<absl::Time> DeadlineOf(const std::string& key) const;

  // Stops the thread and drops every deadline: when it returns, no callback
  // is running or will run. Idempotent.
  // REQUIRES: not called from a callback.
  void Shutdown();

 private:
  void Run();

  const std::shared_ptr<Clock> clock_;
  const Callback on_deadline_;
  int64_t jump_listener_ = 0;

  mutable absl::Mutex mu_;
  absl::CondVar wake_;  // A new earliest deadline, a clock jump, or shutdown.
  std::map<std::string, absl::Time> by_key_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<absl::Time, std::string>> queue_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;

  // Joined by the first Shutdown; guarded by shutdown_mu_ so that
  // concurrent calls wait for it.
  absl::Mutex shutdown_mu_;
  std::thread thread_ ABSL_GUARDED_BY(shutdown_mu_);
};

}  // namespace debugplane::base

#endif  // DEBUGPLANE_BASE_DEADLINE_TIMER_H_
