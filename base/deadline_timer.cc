#include "base/deadline_timer.h"

namespace debugplane::base {

DeadlineTimer::DeadlineTimer(std::shared_ptr<Clock> clock, Callback on_deadline)
    : clock_(std::move(clock)), on_deadline_(std::move(on_deadline)) {
  // A clock moved by hand wakes the thread so that it looks at the time
  // again; the system clock's waits simply end at the deadline.
  jump_listener_ = clock_->AddJumpListener([this] {
    absl::MutexLock lock(&mu_);
    wake_.Signal();
  });
  absl::MutexLock lock(&shutdown_mu_);
  thread_ = std::thread([this] { Run(); });
}

DeadlineTimer::~DeadlineTimer() { Shutdown(); }

void DeadlineTimer::Set(const std::string& key, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return;
  auto [it, inserted] = by_key_.try_emplace(key, deadline);
  if (!inserted) {
    if (it->second == deadline) return;
    queue_.erase({it->second, key});
    it->second = deadline;
  }
  queue_.emplace(deadline, key);
  // Only a new earliest deadline changes how long the thread sleeps.
  if (queue_.begin()->second == key) wake_.Signal();
}

void DeadlineTimer::Cancel(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return;
  queue_.erase({it->second, key});
  by_key_.erase(it);
}

std::optional<absl::Time> DeadlineTimer::DeadlineOf(const std::string& key) const {
  absl::MutexLock lock(&mu_);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return std::nullopt;
  return it->second;
}

void DeadlineTimer::Shutdown() {
  absl::MutexLock shutdown_lock(&shutdown_mu_);
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    by_key_.clear();
    queue_.clear();
    wake_.Signal();
  }
  if (!thread_.joinable()) return;
  thread_.join();
  clock_->RemoveJumpListener(jump_listener_);
}

void DeadlineTimer::Run() {
  absl::MutexLock lock(&mu_);
  while (!shutting_down_) {
    if (queue_.empty()) {
      wake_.Wait(&mu_);
      continue;
    }
    const auto [deadline, key] = *queue_.begin();
    if (clock_->Now() < deadline) {
      wake_.WaitWithTimeout(&mu_, clock_->RealTimeUntil(deadline));
      continue;
    }
    queue_.erase(queue_.begin());
    by_key_.erase(key);
    // The callback takes other locks (the job manager's): never under ours.
    mu_.Unlock();
    on_deadline_(key);
    mu_.Lock();
  }
}

}  // namespace debugplane::base
