#include "service/dashboard/session_store.h"

#include <openssl/rand.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/strings/escaping.h"
#include "spdlog/spdlog.h"

namespace debugplane::service::dashboard {

std::string RandomToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    spdlog::critical("OpenSSL RAND_bytes failed: no randomness for session ids");
    std::abort();
  }
  return absl::WebSafeBase64Escape(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

SessionStore::SessionStore(SessionOptions options) : options_(std::move(options)) {}

Session SessionStore::Create(std::string access_key_id, std::string secret_digest) {
  Session session{.id = RandomToken(),
                  .csrf_token = RandomToken(),
                  .access_key_id = std::move(access_key_id),
                  .secret_digest = std::move(secret_digest),
                  .last_used = options_.clock->Now()};
  absl::MutexLock lock(&mu_);
  EvictLocked(session.access_key_id);
  sessions_[session.id] = session;
  return session;
}

std::optional<Session> SessionStore::Find(absl::string_view id) {
  const absl::Time now = options_.clock->Now();
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return std::nullopt;
  if (now - it->second.last_used > options_.idle_timeout) {
    sessions_.erase(it);
    return std::nullopt;
  }
  it->second.last_used = now;
  return it->second;
}

void SessionStore::Remove(absl::string_view id) {
  absl::MutexLock lock(&mu_);
  if (auto it = sessions_.find(id); it != sessions_.end()) sessions_.erase(it);
}

size_t SessionStore::size() const {
  absl::MutexLock lock(&mu_);
  return sessions_.size();
}

SessionStore::SessionMap::iterator SessionStore::OldestOfLocked(absl::string_view access_key_id) {
  auto oldest = sessions_.end();
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
    if (it->second.access_key_id != access_key_id) continue;
    if (oldest == sessions_.end() || it->second.last_used < oldest->second.last_used) oldest = it;
  }
  return oldest;
}

void SessionStore::EvictLocked(absl::string_view access_key_id) {
  const absl::Time now = options_.clock->Now();
  std::erase_if(sessions_, [&](const auto& entry) {
    return now - entry.second.last_used > options_.idle_timeout;
  });
  const size_t own = std::count_if(sessions_.begin(), sessions_.end(), [&](const auto& entry) {
    return entry.second.access_key_id == access_key_id;
  });
  if (own >= std::max<size_t>(1, options_.max_sessions_per_key)) {
    sessions_.erase(OldestOfLocked(access_key_id));
  }
  if (sessions_.size() < options_.max_sessions || sessions_.empty()) return;
  // The store is full: the keys holding the most sessions give up their
  // least recently used one.
  std::map<std::string, size_t, std::less<>> per_key;
  size_t most = 0;
  for (const auto& [id, session] : sessions_) {
    most = std::max(most, ++per_key[session.access_key_id]);
  }
  auto victim = sessions_.end();
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
    if (per_key[it->second.access_key_id] != most) continue;
    if (victim == sessions_.end() || it->second.last_used < victim->second.last_used) victim = it;
  }
  sessions_.erase(victim);
}

}  // namespace debugplane::service::dashboard
