#include "base/steady_clock.h"

#include <chrono>

namespace debugplane::base {
namespace {

class MonotonicClock final : public Clock {
 public:
  absl::Time Now() const override {
    return absl::UnixEpoch() +
           absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
  }
  absl::Duration RealTimeUntil(absl::Time deadline) const override { return deadline - Now(); }
  // It never jumps: listeners are never called.
  int64_t AddJumpListener(std::function<void()>) override { return 0; }
  void RemoveJumpListener(int64_t) override {}
};

}  // namespace

std::shared_ptr<Clock> SteadyClock() {
  static const auto* const clock = new std::shared_ptr<Clock>(std::make_shared<MonotonicClock>());
  return *clock;
}

}  // namespace debugplane::base
