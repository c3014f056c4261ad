#include "service/auth/credential_store.h"

#include <utility>

namespace debugplane::service::auth {

absl::StatusOr<std::shared_ptr<CredentialStore>> CredentialStore::Open(std::string path) {
  absl::StatusOr<CredentialSet> loaded = LoadCredentialsFile(path);
  if (!loaded.ok()) return loaded.status();
  return std::make_shared<CredentialStore>(*std::move(loaded), std::move(path));
}

CredentialStore::CredentialStore(CredentialSet credentials, std::string path)
    : path_(std::move(path)),
      current_(std::make_shared<const CredentialSet>(std::move(credentials))) {}

std::shared_ptr<const CredentialSet> CredentialStore::Snapshot() const {
  absl::MutexLock lock(&mutex_);
  return current_;
}

absl::Status CredentialStore::Reload() {
  if (path_.empty()) return absl::FailedPreconditionError("these credentials have no file");
  absl::StatusOr<CredentialSet> loaded = LoadCredentialsFile(path_);
  if (!loaded.ok()) return loaded.status();
  Replace(*std::move(loaded));
  return absl::OkStatus();
}

void CredentialStore::Replace(CredentialSet credentials) {
  auto next = std::make_shared<const CredentialSet>(std::move(credentials));
  std::shared_ptr<const CredentialSet> previous;
  {
    absl::MutexLock lock(&mutex_);
    previous = std::exchange(current_, std::move(next));
  }
  // `previous` (and its secrets) is freed here, outside the lock, unless a
  // call still holds it.
}

}  // namespace debugplane::service::auth
