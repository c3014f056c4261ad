// Failed authentications per client address, as token buckets: each
// address may fail `burst` times at once and `per_minute` times a minute
// after that; an address whose bucket is empty is refused (429 with
// Retry-After) before its credentials are even checked, so a guesser learns
// nothing from the refused tries. Requests that authenticate take nothing,
// so a client that never fails is never limited.
//
// Addresses are keyed by IPv4 address or IPv6 /64 (a host commonly owns a
// whole /64). Time comes from a base::Clock, so tests move a FakeClock.

#ifndef DEBUGPLANE_SERVICE_HTTP_CLIENT_RATE_LIMITER_H_
#define DEBUGPLANE_SERVICE_HTTP_CLIENT_RATE_LIMITER_H_

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"

struct sockaddr;

namespace debugplane::service::http {

struct ClientRateLimiterOptions {
  double per_minute = 10;  // Tokens added a minute.
  double burst = 20;       // Tokens an address starts with and holds at most.
  // Addresses tracked at most; beyond, full buckets (which limit nothing)
  // are forgotten first, then the least recently charged ones.
  size_t max_clients = 10000;
  std::shared_ptr<base::Clock> clock = base::SystemClock();
};

// Thread-safe; every method takes one short mutex.
class ClientRateLimiter {
 public:
  explicit ClientRateLimiter(ClientRateLimiterOptions options = {});

  // How long `client` must wait before its next try, or nullopt if it may
  // try now. Takes nothing.
  std::optional<absl::Duration> RetryAfter(absl::string_view client) const;

  // Charges one failed try to `client`.
  void Charge(absl::string_view client);

  size_t clients() const;

 private:
  struct Bucket {
    double tokens = 0;
    absl::Time updated;
  };
  double TokensAt(const Bucket& bucket, absl::Time now) const;
  void MakeRoomLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ClientRateLimiterOptions options_;
  mutable absl::Mutex mu_;
  std::map<std::string, Bucket, std::less<>> buckets_ ABSL_GUARDED_BY(mu_);
};

// The key ClientRateLimiter counts `address` under: the IPv4 address, or
// the IPv6 address's /64 ("2001:db8:1:2::/64"); an IPv4-mapped IPv6
// address counts as its IPv4 address. "" for another family or null.
std::string ClientKeyOf(const sockaddr* address);

// Marks `status` as a refused credential (a wrong key or secret, a bad
// signature) that counts against the client's address: HttpResponse's
// failed_authentication is set from it. Not for a request that presented
// no credential at all.
void MarkCredentialRefused(absl::Status& status);
bool CredentialRefused(const absl::Status& status);

}  // namespace debugplane::service::http

#endif  // DEBUGPLANE_SERVICE_HTTP_CLIENT_RATE_LIMITER_H_
