#include "service/dashboard/session_store.h"

#include <openssl/rand.h>

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
  if (sessions_.size() >= options_.max_sessions) EvictLocked();
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

void SessionStore::EvictLocked() {
  const absl::Time now = options_.clock->Now();
  auto oldest = sessions_.end();
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (now - it->second.last_used > options_.idle_timeout) {
      it = sessions_.erase(it);
      continue;
    }
    if (oldest == sessions_.end() || it->second.last_used < oldest->second.last_used) oldest = it;
    ++it;
  }
  if (sessions_.size() >= options_.max_sessions && oldest != sessions_.end()) {
    sessions_.erase(oldest);
  }
}

}  // namespace debugplane::service::dashboard
