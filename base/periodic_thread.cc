#include "base/periodic_thread.h"

#include <utility>

#include "base/clock_wake.h"

namespace debugplane::base {

PeriodicThread::PeriodicThread(std::shared_ptr<Clock> clock, absl::Duration interval,
                               absl::AnyInvocable<void()> pass)
    : clock_(std::move(clock)), interval_(interval), pass_(std::move(pass)) {}

PeriodicThread::~PeriodicThread() { Shutdown(); }

void PeriodicThread::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (started_ || stopping_) return;
    started_ = true;
  }
  // Outside mu_: the clock calls the listener under a lock of its own.
  jump_listener_ = WakeOnJumps(*clock_, mu_, wake_);
  thread_ = std::thread([this] { Loop(); });
}

void PeriodicThread::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    wake_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
  if (jump_listener_ != 0) clock_->RemoveJumpListener(jump_listener_);
}

bool PeriodicThread::stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

void PeriodicThread::Loop() {
  while (true) {
    pass_();
    const absl::Time next = clock_->Now() + interval_;
    absl::MutexLock lock(&mu_);
    while (!stopping_ && clock_->Now() < next) {
      wake_.WaitWithTimeout(&mu_, clock_->RealTimeUntil(next));
    }
    if (stopping_) return;
  }
}

}  // namespace debugplane::base
