#include "service/auth/signature_replay_cache.h"

#include <algorithm>

namespace debugplane::service::auth {

SignatureReplayCache::SignatureReplayCache(size_t capacity)
    : capacity_(std::max<size_t>(1, capacity)) {}

bool SignatureReplayCache::FirstUse(const std::string& signature, absl::Time expires,
                                    absl::Time now) {
  absl::MutexLock lock(&mu_);
  while (!by_expiry_.empty() && by_expiry_.begin()->first <= now) {
    expiry_.erase(by_expiry_.begin()->second);
    by_expiry_.erase(by_expiry_.begin());
  }
  if (expiry_.contains(signature)) return false;
  if (expiry_.size() >= capacity_) {
    expiry_.erase(by_expiry_.begin()->second);
    by_expiry_.erase(by_expiry_.begin());
  }
  expiry_.emplace(signature, expires);
  by_expiry_.emplace(expires, signature);
  return true;
}

size_t SignatureReplayCache::size() const {
  absl::MutexLock lock(&mu_);
  return expiry_.size();
}

}  // namespace debugplane::service::auth
