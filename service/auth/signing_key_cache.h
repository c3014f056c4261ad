// SigV4 signing keys (sigv4.h, SigV4SigningKey) kept per access key, day,
// region and service, so that a verifier derives a key (four HMACs) once a
// day per client instead of at every request.
//
// A cached key is only ever the key that deriving it again would give: an
// entry remembers the secret it was derived from and is used only while the
// credential's secret is still that one (a reloaded credentials file that
// changes a secret derives anew). The request's own claims (its signature)
// play no part in the lookup, so no request is accepted that would be
// refused without the cache. Nothing here logs.

#ifndef DEBUGPLANE_SERVICE_AUTH_SIGNING_KEY_CACHE_H_
#define DEBUGPLANE_SERVICE_AUTH_SIGNING_KEY_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace debugplane::service::auth {

// Thread-safe. Holds at most `capacity` keys (about 200 bytes each with the
// secret they came from); when full, it starts over empty (keys of past
// days are the bulk of what it drops).
class SigningKeyCache {
 public:
  explicit SigningKeyCache(size_t capacity = 4096) : capacity_(capacity) {}

  SigningKeyCache(const SigningKeyCache&) = delete;
  SigningKeyCache& operator=(const SigningKeyCache&) = delete;

  // SigV4SigningKey(secret_access_key, date, region, service), from the
  // cache when `access_key_id`'s entry for that scope was derived from the
  // same secret.
  std::string SigningKey(absl::string_view access_key_id, absl::string_view secret_access_key,
                         absl::string_view date, absl::string_view region,
                         absl::string_view service);

  size_t size() const;
  // Keys derived (cache misses) so far, for tests.
  int64_t derivations() const;

 private:
  struct Entry {
    std::string secret_access_key;
    std::string signing_key;
  };

  const size_t capacity_;
  mutable absl::Mutex mu_;
  // "KEY_ID\0DATE\0REGION\0SERVICE" -> the key and the secret it came from.
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  int64_t derivations_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace debugplane::service::auth

#endif  // DEBUGPLANE_SERVICE_AUTH_SIGNING_KEY_CACHE_H_
