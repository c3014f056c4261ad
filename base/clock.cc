#include "base/clock.h"

#include <utility>

#include "absl/time/clock.h"

namespace debugplane::base {
namespace {

class SystemClockImpl final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  absl::Duration RealTimeUntil(absl::Time deadline) const override {
    return deadline - absl::Now();
  }
  // The system clock never jumps (as far as waiters care: a changed wall
  // clock is noticed at the next wake-up).
  int64_t AddJumpListener(std::function<void()> listener) override { return 0; }
  void RemoveJumpListener(int64_t id) override {}
};

}  // namespace

std::shared_ptr<Clock> SystemClock() {
  static const auto* const clock = new std::shared_ptr<Clock>(std::make_shared<SystemClockImpl>());
  return *clock;
}

FakeClock::FakeClock(absl::Time start) : now_ns_(absl::ToUnixNanos(start)) {}

absl::Time FakeClock::Now() const { return absl::FromUnixNanos(now_ns_.load()); }

absl::Duration FakeClock::RealTimeUntil(absl::Time deadline) const {
  // Waiters are woken by Advance through their listeners, not by real time.
  return absl::InfiniteDuration();
}

int64_t FakeClock::AddJumpListener(std::function<void()> listener) {
  absl::MutexLock lock(&listeners_mu_);
  const int64_t id = next_listener_id_++;
  listeners_.emplace(id, std::move(listener));
  return id;
}

void FakeClock::RemoveJumpListener(int64_t id) {
  absl::MutexLock lock(&listeners_mu_);
  listeners_.erase(id);
}

void FakeClock::Advance(absl::Duration delta) {
  if (delta < absl::ZeroDuration()) return;
  now_ns_.fetch_add(absl::ToInt64Nanoseconds(delta));
  absl::ReaderMutexLock lock(&listeners_mu_);
  for (const auto& [id, listener] : listeners_) listener();
}

}  // namespace debugplane::base
