#include "service/auth/credentials_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/jobs/validation.h"

namespace debugplane::service::auth {
namespace {

constexpr absl::string_view kCertificatePrefix = "cn:";
constexpr size_t kMaxKeyIdLength = 128;
constexpr size_t kMaxSecretLength = 1024;

// The role RoleName names `name`.
std::optional<Role> ParseRole(absl::string_view name) {
  for (const Role role : {Role::kAdmin, Role::kOperator, Role::kReader, Role::kAgent}) {
    if (RoleName(role) == name) return role;
  }
  return std::nullopt;
}

bool IsKeyIdCharacter(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
}

// Checks the access key id (or the common name after "cn:"); "" if fine.
std::string KeyIdProblem(absl::string_view key_id) {
  if (key_id.empty()) return "an empty access key id";
  if (key_id.size() > kMaxKeyIdLength) {
    return absl::StrCat("the access key id is longer than ", kMaxKeyIdLength, " characters");
  }
  for (char c : key_id) {
    if (!IsKeyIdCharacter(c)) {
      return absl::StrCat("the access key id '", key_id,
                          "' may only contain letters, digits, '_', '.' and '-'");
    }
  }
  return "";
}

std::string SecretProblem(absl::string_view secret) {
  if (secret.size() > kMaxSecretLength) {
    return absl::StrCat("the secret is longer than ", kMaxSecretLength, " characters");
  }
  for (char c : secret) {
    if (!absl::ascii_isgraph(static_cast<unsigned char>(c))) {
      return "the secret contains a character that is not printable ASCII";
    }
  }
  return "";
}

// Parses one non-empty line's fields into `credential`; "" if fine.
std::string ParseFields(const std::vector<absl::string_view>& fields, Credential* credential) {
  std::optional<Role> role = ParseRole(fields[0]);
  if (!role.has_value()) {
    return absl::StrCat("unknown role '", fields[0], "' (use admin, operator, reader or agent)");
  }
  credential->role = *role;
  if (fields.size() < 2) return "missing the access key id and secret after the role";
  const bool certificate = absl::StartsWith(fields[1], kCertificatePrefix);
  if (fields.size() < 3) {
    return certificate ? "missing '-' after the certificate's common name"
                       : "missing the secret access key after the access key id";
  }
  if (fields.size() > 4) {
    return "too many fields (expected ROLE ACCESS_KEY_ID SECRET_ACCESS_KEY [JOB_NAME])";
  }
  absl::string_view id = fields[1];
  if (certificate) id.remove_prefix(kCertificatePrefix.size());
  if (std::string problem = KeyIdProblem(id); !problem.empty()) {
    return certificate ? absl::StrCat("bad certificate common name: ", problem) : problem;
  }
  credential->access_key_id = std::string(fields[1]);
  if (certificate) {
    if (fields[2] != "-") return "a certificate mapping (cn:...) takes '-' instead of a secret";
  } else {
    if (std::string problem = SecretProblem(fields[2]); !problem.empty()) return problem;
    credential->secret_access_key = std::string(fields[2]);
  }
  if (fields.size() == 4) {
    if (credential->role != Role::kAgent) {
      return absl::StrCat("a job name binds only agent credentials, not role ", fields[0]);
    }
    if (absl::Status valid = core::ValidateTrainingJobName(fields[3], "JOB_NAME"); !valid.ok()) {
      return absl::StrCat("bad job name '", fields[3], "': ", valid.message());
    }
    credential->job_name = std::string(fields[3]);
  }
  return "";
}

}  // namespace

std::string CredentialSet::Summary() const {
  int counts[4] = {0, 0, 0, 0};
  for (const auto& [id, credential] : keys) ++counts[static_cast<int>(credential.role)];
  return absl::StrFormat(
      "%d credentials (admin %d, operator %d, reader %d, agent %d), %d certificate mappings",
      keys.size(), counts[static_cast<int>(Role::kAdmin)],
      counts[static_cast<int>(Role::kOperator)], counts[static_cast<int>(Role::kReader)],
      counts[static_cast<int>(Role::kAgent)], common_names.size());
}

absl::StatusOr<CredentialSet> ParseCredentials(absl::string_view text,
                                               absl::string_view file_name) {
  CredentialSet set;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (size_t hash = line.find('#'); hash != absl::string_view::npos) line = line.substr(0, hash);
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r\v\f"), absl::SkipEmpty());
    if (fields.empty()) continue;
    Credential credential;
    std::string problem = ParseFields(fields, &credential);
    if (problem.empty()) {
      const bool certificate = absl::StartsWith(credential.access_key_id, kCertificatePrefix);
      const std::string id = certificate
                                 ? credential.access_key_id.substr(kCertificatePrefix.size())
                                 : credential.access_key_id;
      auto& table = certificate ? set.common_names : set.keys;
      if (!table.emplace(id, std::move(credential)).second) {
        problem = certificate ? absl::StrCat("duplicate certificate common name '", id, "'")
                              : absl::StrCat("duplicate access key id '", id, "'");
      }
    }
    if (!problem.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(file_name, ":", line_number, ": ", problem));
    }
  }
  return set;
}

absl::StatusOr<CredentialSet> LoadCredentialsFile(const std::string& path) {
  // The permissions are checked on the descriptor that is read, so the file
  // cannot be swapped in between.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot read the credentials file ", path, ": ", std::strerror(errno)));
  }
  struct stat info;
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    close(fd);
    return absl::NotFoundError(
        absl::StrCat("the credentials file ", path, " is not a regular file"));
  }
  if ((info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    close(fd);
    return absl::PermissionDeniedError(absl::StrFormat(
        "the credentials file %s is accessible by group or others (mode %04o): it holds "
        "secrets; run chmod 600 %s",
        path, info.st_mode & 07777, path));
  }
  std::string text;
  char buffer[8192];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) text.append(buffer, static_cast<size_t>(n));
  const int read_errno = errno;
  close(fd);
  if (n < 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot read the credentials file ", path, ": ", std::strerror(read_errno)));
  }
  return ParseCredentials(text, path);
}

}  // namespace debugplane::service::auth
