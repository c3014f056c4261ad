#include "service/http/client_rate_limiter.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace debugplane::service::http {
namespace {

constexpr absl::string_view kRefusedPayload = "debugplane.dev/credential-refused";

}  // namespace

ClientRateLimiter::ClientRateLimiter(ClientRateLimiterOptions options)
    : options_(std::move(options)) {}

double ClientRateLimiter::TokensAt(const Bucket& bucket, absl::Time now) const {
  const double minutes = std::max(0.0, absl::ToDoubleMinutes(now - bucket.updated));
  return std::min(options_.burst, bucket.tokens + minutes * options_.per_minute);
}

std::optional<absl::Duration> ClientRateLimiter::RetryAfter(absl::string_view client) const {
  const absl::Time now = options_.clock->Now();
  absl::MutexLock lock(&mu_);
  auto it = buckets_.find(client);
  if (it == buckets_.end()) return std::nullopt;
  const double tokens = TokensAt(it->second, now);
  if (tokens >= 1) return std::nullopt;
  return absl::Minutes((1 - tokens) / options_.per_minute);
}

void ClientRateLimiter::Charge(absl::string_view client) {
  const absl::Time now = options_.clock->Now();
  absl::MutexLock lock(&mu_);
  auto it = buckets_.find(client);
  if (it == buckets_.end()) {
    if (buckets_.size() >= options_.max_clients) MakeRoomLocked(now);
    it = buckets_.emplace(std::string(client), Bucket{.tokens = options_.burst, .updated = now})
             .first;
  }
  Bucket& bucket = it->second;
  bucket.tokens = std::max(0.0, TokensAt(bucket, now) - 1);
  bucket.updated = now;
}

size_t ClientRateLimiter::clients() const {
  absl::MutexLock lock(&mu_);
  return buckets_.size();
}

void ClientRateLimiter::MakeRoomLocked(absl::Time now) {
  std::erase_if(buckets_,
                [&](const auto& entry) { return TokensAt(entry.second, now) >= options_.burst; });
  if (buckets_.size() < options_.max_clients) return;
  auto oldest = std::min_element(
      buckets_.begin(), buckets_.end(),
      [](const auto& a, const auto& b) { return a.second.updated < b.second.updated; });
  buckets_.erase(oldest);
}

std::string ClientKeyOf(const sockaddr* address) {
  if (address == nullptr) return "";
  char text[INET6_ADDRSTRLEN] = {};
  if (address->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
    inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
    return text;
  }
  if (address->sa_family != AF_INET6) return "";
  const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address);
  if (IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) {
    in_addr v4;
    std::memcpy(&v4, v6->sin6_addr.s6_addr + 12, sizeof(v4));
    inet_ntop(AF_INET, &v4, text, sizeof(text));
    return text;
  }
  in6_addr prefix = v6->sin6_addr;
  std::memset(prefix.s6_addr + 8, 0, 8);
  inet_ntop(AF_INET6, &prefix, text, sizeof(text));
  return absl::StrCat(text, "/64");
}

void MarkCredentialRefused(absl::Status& status) {
  if (!status.ok()) status.SetPayload(kRefusedPayload, absl::Cord("1"));
}

bool CredentialRefused(const absl::Status& status) {
  return status.GetPayload(kRefusedPayload).has_value();
}

}  // namespace debugplane::service::http
