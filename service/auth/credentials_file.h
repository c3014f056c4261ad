// The credentials file (`--credentials FILE`): who may call the server.
//
// One credential per line, fields separated by blanks:
//   ROLE ACCESS_KEY_ID SECRET_ACCESS_KEY [JOB_NAME]
//   ROLE cn:COMMON_NAME - [JOB_NAME]
// ROLE is admin, operator, reader or agent. The second form maps a TLS client
// certificate whose subject CN is COMMON_NAME (verified against --client-ca)
// to ROLE. JOB_NAME, allowed only for agents, binds the credential to one
// training job. `#` starts a comment; blank lines are ignored. Access key ids
// are 1-128 of [A-Za-z0-9_.-]; secrets are 1-1024 printable characters
// without blanks. The file must not be accessible by group or others.

#ifndef DEBUGPLANE_SERVICE_AUTH_CREDENTIALS_FILE_H_
#define DEBUGPLANE_SERVICE_AUTH_CREDENTIALS_FILE_H_

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/auth/auth.h"

namespace debugplane::service::auth {

// One line of the file.
struct Credential {
  Role role = Role::kReader;
  // The access key id, or "cn:COMMON_NAME" for a certificate mapping.
  std::string access_key_id;
  // Empty for a certificate mapping. Never logged.
  std::string secret_access_key;
  // Non-empty: bound to this training job (agents only).
  std::string job_name;
};

// A parsed file. Immutable once built; shared between threads read-only.
struct CredentialSet {
  // Keyed by access key id.
  absl::flat_hash_map<std::string, Credential> keys;
  // Keyed by certificate common name (without "cn:").
  absl::flat_hash_map<std::string, Credential> common_names;

  // "4 credentials (admin 1, operator 1, reader 1, agent 1), 1 certificate
  // mapping": for the log, never a secret.
  std::string Summary() const;
};

// Parses the file's `text`. On the first bad line returns INVALID_ARGUMENT
// "FILE:LINE: what is wrong" (unknown role, missing secret, duplicate key
// id, bad job name, ...), never quoting a secret. `file_name` only names
// the file in errors.
absl::StatusOr<CredentialSet> ParseCredentials(absl::string_view text, absl::string_view file_name);

// Reads and parses `path`. Errors: NOT_FOUND if it cannot be read;
// PERMISSION_DENIED if group or others have any access to it ("... chmod 600
// FILE"); ParseCredentials's errors.
absl::StatusOr<CredentialSet> LoadCredentialsFile(const std::string& path);

}  // namespace debugplane::service::auth

#endif  // DEBUGPLANE_SERVICE_AUTH_CREDENTIALS_FILE_H_
