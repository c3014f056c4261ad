#include "client/agent/host_identity.h"

#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace debugplane::client {
namespace {

constexpr size_t kMaxHostNameChars = 128;

absl::Status CheckHostName(const std::string& name, const std::string& origin) {
  if (name.empty() || name.size() > kMaxHostNameChars) {
    return absl::InvalidArgumentError(absl::StrCat(origin, " gives the host name '", name,
                                                   "': a host name has 1 to ", kMaxHostNameChars,
                                                   " characters"));
  }
  for (const char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' &&
        c != '-') {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, " gives the host name '", name,
                       "': use letters, digits, '.', '_' and '-' only (it names the host's "
                       "system metrics files)"));
    }
  }
  return absl::OkStatus();
}

// algo-<rank + 1> from a launcher's rank variable.
absl::StatusOr<std::string> FromRank(const char* variable, const std::string& value) {
  int64_t rank = -1;
  if (!absl::SimpleAtoi(value, &rank) || rank < 0 || rank > 1000000) {
    return absl::InvalidArgumentError(absl::StrCat(
        variable, "='", value, "' is not a node rank (a whole number from 0); set --node-id"));
  }
  return absl::StrCat("algo-", rank + 1);
}

}  // namespace

absl::StatusOr<std::string> ResolveHostName(const std::string& node_id,
                                            const EnvironmentReader& environment,
                                            const std::string& machine) {
  std::string name;
  std::string origin;
  if (!node_id.empty()) {
    name = node_id;
    origin = "--node-id";
  } else if (const char* sm = environment("SM_CURRENT_HOST"); sm != nullptr && *sm != '\0') {
    name = sm;
    origin = "SM_CURRENT_HOST";
  } else {
    for (const char* variable : {"GROUP_RANK", "NODE_RANK"}) {
      const char* value = environment(variable);
      if (value == nullptr || *value == '\0') continue;
      absl::StatusOr<std::string> ranked = FromRank(variable, value);
      if (!ranked.ok()) return ranked.status();
      name = *ranked;
      origin = variable;
      break;
    }
    if (origin.empty()) {
      name = machine;
      origin = "the machine's name";
    }
  }
  if (absl::Status valid = CheckHostName(name, origin); !valid.ok()) return valid;
  return name;
}

std::string MachineName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "";
  return host;
}

std::string AgentIdentity() { return absl::StrCat(MachineName(), ":", getpid()); }

}  // namespace debugplane::client
