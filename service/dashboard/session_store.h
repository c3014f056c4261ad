// The dashboard's signed-in sessions, in memory (a restart signs everyone
// out): a random id per session (the dp_session cookie), a CSRF token per
// session, and an idle expiry measured by a base::Clock (tests move a
// FakeClock). A session remembers which access key signed in and a digest
// of its secret, not its role: the role is read from the credential store at
// every request, so a removed or changed key ends its sessions.

#ifndef DEBUGPLANE_SERVICE_DASHBOARD_SESSION_STORE_H_
#define DEBUGPLANE_SERVICE_DASHBOARD_SESSION_STORE_H_

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"

namespace debugplane::service::dashboard {

struct SessionOptions {
  // A session unused for this long is gone.
  absl::Duration idle_timeout = absl::Hours(12);
  // Sessions kept at most. Beyond, expired ones go first, then the least
  // recently used session of the access key that holds the most: a key
  // that signs in again and again evicts its own sessions, never those of
  // the other keys.
  size_t max_sessions = 10000;
  // Sessions of one access key at most; its next sign-in drops its least
  // recently used one.
  size_t max_sessions_per_key = 100;
  std::shared_ptr<base::Clock> clock = base::SystemClock();
};

struct Session {
  std::string id;          // 256 random bits, base64url: the cookie's value.
  std::string csrf_token;  // 256 random bits, base64url.
  std::string access_key_id;
  // SHA-256 (hex) of the secret the session signed in with.
  std::string secret_digest;
  absl::Time last_used;
};

// 256 bits from OpenSSL's RAND_bytes, base64url without padding (43
// characters). Aborts if the system has no randomness (never in practice).
std::string RandomToken();

// Thread-safe; no method blocks beyond a short mutex.
class SessionStore {
 public:
  explicit SessionStore(SessionOptions options = {});

  // A new session for `access_key_id`, last used now.
  Session Create(std::string access_key_id, std::string secret_digest);

  // The session with id `id`, marked used now; nullopt for an unknown id or
  // one idle longer than the timeout (which is then removed).
  std::optional<Session> Find(absl::string_view id);

  // Removes the session (sign-out); unknown ids are ignored.
  void Remove(absl::string_view id);

  // Sessions held (expired ones not yet found included).
  size_t size() const;

 private:
  using SessionMap = std::map<std::string, Session, std::less<>>;
  // Makes room for one more session of `access_key_id`.
  void EvictLocked(absl::string_view access_key_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The least recently used session of `access_key_id`, or end().
  SessionMap::iterator OldestOfLocked(absl::string_view access_key_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SessionOptions options_;
  mutable absl::Mutex mu_;
  SessionMap sessions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace debugplane::service::dashboard

#endif  // DEBUGPLANE_SERVICE_DASHBOARD_SESSION_STORE_H_
