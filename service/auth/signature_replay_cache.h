// The signatures of recent state-changing SigV4 requests, so that a captured
// request is obeyed once: a second use of its signature is refused for as
// long as the signature itself is valid (the allowed clock skew), after
// which it is refused as expired anyway.

#ifndef DEBUGPLANE_SERVICE_AUTH_SIGNATURE_REPLAY_CACHE_H_
#define DEBUGPLANE_SERVICE_AUTH_SIGNATURE_REPLAY_CACHE_H_

#include <cstddef>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace debugplane::service::auth {

// Thread-safe. Memory is bounded by `capacity` entries (about 200 bytes
// each); time is whatever the caller passes as `now` (the server's Clock).
class SignatureReplayCache {
 public:
  explicit SignatureReplayCache(size_t capacity);

  SignatureReplayCache(const SignatureReplayCache&) = delete;
  SignatureReplayCache& operator=(const SignatureReplayCache&) = delete;

  // Records `signature` as used until `expires`; returns false (and records
  // nothing) if it was recorded before and has not expired at `now`.
  // Entries expired at `now` are forgotten first; at capacity, the entry
  // that expires first is forgotten to make room (a burst of more than
  // `capacity` state-changing requests within the skew window could then
  // let the oldest of them be replayed).
  bool FirstUse(const std::string& signature, absl::Time expires, absl::Time now);

  size_t size() const;

 private:
  const size_t capacity_;
  mutable absl::Mutex mu_;
  // Signature -> when it expires, and the same ordered by expiry.
  absl::flat_hash_map<std::string, absl::Time> expiry_ ABSL_GUARDED_BY(mu_);
  std::multimap<absl::Time, std::string> by_expiry_ ABSL_GUARDED_BY(mu_);
};

}  // namespace debugplane::service::auth

#endif  // DEBUGPLANE_SERVICE_AUTH_SIGNATURE_REPLAY_CACHE_H_
