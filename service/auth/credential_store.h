// The credentials in force, re-read from their file on demand (SIGHUP).

#ifndef DEBUGPLANE_SERVICE_AUTH_CREDENTIAL_STORE_H_
#define DEBUGPLANE_SERVICE_AUTH_CREDENTIAL_STORE_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "service/auth/credentials_file.h"

namespace debugplane::service::auth {

// Thread-safe. Readers take a snapshot (a shared_ptr copy under a mutex held
// for that copy only), so a reload, which reads and parses the file without
// the lock, never blocks them, and a call keeps the snapshot it started with.
class CredentialStore {
 public:
  // Loads `path` (LoadCredentialsFile's errors).
  static absl::StatusOr<std::shared_ptr<CredentialStore>> Open(std::string path);

  // A store over `credentials` with no file (Reload fails): for tests and
  // embedders.
  explicit CredentialStore(CredentialSet credentials, std::string path = "");

  // The credentials now in force. Never null.
  std::shared_ptr<const CredentialSet> Snapshot() const;

  // Re-reads the file. On success the new credentials are in force for calls
  // that start afterwards; on error (the file's errors) the old ones stay.
  absl::Status Reload();

  // Replaces the credentials (for tests and embedders).
  void Replace(CredentialSet credentials);

  const std::string& path() const { return path_; }

 private:
  const std::string path_;
  mutable absl::Mutex mutex_;
  std::shared_ptr<const CredentialSet> current_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace debugplane::service::auth

#endif  // DEBUGPLANE_SERVICE_AUTH_CREDENTIAL_STORE_H_
