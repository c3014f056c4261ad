#include "core/replication/change_feed_pruner.h"

#include <utility>

#include "spdlog/spdlog.h"

namespace debugplane::core {

ChangeFeedPruner::ChangeFeedPruner(persistence::Storage* storage, ChangeFeedPrunerOptions options)
    : storage_(storage), options_(std::move(options)) {}

ChangeFeedPruner::~ChangeFeedPruner() { Shutdown(); }

void ChangeFeedPruner::Start() {
  // A base::FakeClock moved by a test wakes the loop.
  jump_listener_ = options_.clock->AddJumpListener([this] {
    absl::MutexLock lock(&mu_);
    wake_.SignalAll();
  });
  thread_ = std::thread([this] { Loop(); });
}

void ChangeFeedPruner::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    wake_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
  if (jump_listener_ != 0) options_.clock->RemoveJumpListener(jump_listener_);
}

absl::StatusOr<int64_t> ChangeFeedPruner::PruneOnce() {
  const int64_t horizon_us = absl::ToUnixMicros(options_.clock->Now() - options_.retention);
  int64_t total = 0;
  while (true) {
    absl::StatusOr<int64_t> pruned = storage_->PruneChanges(horizon_us, options_.batch);
    if (!pruned.ok()) return pruned.status();
    total += *pruned;
    {
      absl::MutexLock lock(&mu_);
      pruned_ += *pruned;
      if (stopping_) break;
    }
    if (*pruned < options_.batch) break;
  }
  return total;
}

int64_t ChangeFeedPruner::pruned() const {
  absl::MutexLock lock(&mu_);
  return pruned_;
}

void ChangeFeedPruner::Loop() {
  while (true) {
    absl::StatusOr<int64_t> pruned = PruneOnce();
    if (!pruned.ok()) {
      spdlog::warn("pruning the change feed failed (retried in {}): {}",
                   absl::FormatDuration(options_.interval), pruned.status().ToString());
    } else if (*pruned > 0) {
      spdlog::debug("pruned {} superseded change feed entries", *pruned);
    }
    const absl::Time next = options_.clock->Now() + options_.interval;
    absl::MutexLock lock(&mu_);
    while (!stopping_ && options_.clock->Now() < next) {
      wake_.WaitWithTimeout(&mu_, options_.clock->RealTimeUntil(next));
    }
    if (stopping_) return;
  }
}

}  // namespace debugplane::core
