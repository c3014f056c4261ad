#include "core/replication/change_feed_pruner.h"

#include <utility>

#include "spdlog/spdlog.h"

namespace debugplane::core {

ChangeFeedPruner::ChangeFeedPruner(persistence::Storage* storage, ChangeFeedPrunerOptions options)
    : storage_(storage),
      options_(std::move(options)),
      thread_(options_.clock, options_.interval, [this] { Pass(); }) {}

ChangeFeedPruner::~ChangeFeedPruner() { Shutdown(); }

void ChangeFeedPruner::Start() { thread_.Start(); }

void ChangeFeedPruner::Shutdown() { thread_.Shutdown(); }

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
    }
    if (thread_.stopping()) break;
    if (*pruned < options_.batch) break;
  }
  return total;
}

int64_t ChangeFeedPruner::pruned() const {
  absl::MutexLock lock(&mu_);
  return pruned_;
}

void ChangeFeedPruner::Pass() {
  absl::StatusOr<int64_t> pruned = PruneOnce();
  if (!pruned.ok()) {
    spdlog::warn("pruning the change feed failed (retried in {}): {}",
                 absl::FormatDuration(options_.interval), pruned.status().ToString());
  } else if (*pruned > 0) {
    spdlog::debug("pruned {} superseded change feed entries", *pruned);
  }
}

}  // namespace debugplane::core
