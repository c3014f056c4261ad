#include "service/auth/signing_key_cache.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "service/auth/sigv4.h"

namespace debugplane::service::auth {

std::string SigningKeyCache::SigningKey(absl::string_view access_key_id,
                                        absl::string_view secret_access_key,
                                        absl::string_view date, absl::string_view region,
                                        absl::string_view service) {
  // '\0' cannot occur in a parsed credential scope, so the parts cannot
  // run into each other.
  std::string scope = absl::StrCat(access_key_id, absl::string_view("\0", 1), date,
                                   absl::string_view("\0", 1), region,
                                   absl::string_view("\0", 1), service);
  {
    absl::MutexLock lock(&mu_);
    auto found = entries_.find(scope);
    if (found != entries_.end() && found->second.secret_access_key == secret_access_key) {
      return found->second.signing_key;
    }
  }
  // Derived outside the lock: a few microseconds other callers need not wait for.
  std::string signing_key = SigV4SigningKey(secret_access_key, date, region, service);
  absl::MutexLock lock(&mu_);
  ++derivations_;
  if (entries_.size() >= capacity_ && !entries_.contains(scope)) entries_.clear();
  entries_[std::move(scope)] =
      Entry{.secret_access_key = std::string(secret_access_key), .signing_key = signing_key};
  return signing_key;
}

size_t SigningKeyCache::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

int64_t SigningKeyCache::derivations() const {
  absl::MutexLock lock(&mu_);
  return derivations_;
}

}  // namespace debugplane::service::auth
