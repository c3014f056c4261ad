#include "service/call_authorization.h"

#include <string>

#include "grpc/grpc_security_constants.h"
#include "grpcpp/security/auth_context.h"
#include "spdlog/spdlog.h"

namespace debugplane::service {
namespace {

// The key id a refused bearer token claimed, for the log: the part before
// ':' (never the secret), shortened, printable only.
std::string ClaimedKeyId(absl::string_view authorization) {
  const size_t space = authorization.find(' ');
  if (space != absl::string_view::npos) authorization.remove_prefix(space + 1);
  authorization = authorization.substr(0, authorization.find(':'));
  std::string out;
  for (char c : authorization.substr(0, 64)) {
    out.push_back(c > ' ' && c < 127 ? c : '?');
  }
  return out.empty() ? "-" : out;
}

// The verified client certificate's subject CN, or "" if there is none.
std::string PeerCommonName(const grpc::ServerContextBase& context) {
  std::shared_ptr<const grpc::AuthContext> auth_context = context.auth_context();
  if (auth_context == nullptr || !auth_context->IsPeerAuthenticated()) return "";
  std::vector<grpc::string_ref> names =
      auth_context->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME);
  if (names.empty()) return "";
  return std::string(names.front().data(), names.front().size());
}

}  // namespace

absl::StatusOr<auth::Principal> AuthenticateCall(const auth::Authenticator* authenticator,
                                                 const grpc::ServerContextBase& context,
                                                 absl::string_view method) {
  if (authenticator == nullptr || !authenticator->enabled()) {
    return auth::Principal{
        .role = auth::Role::kAdmin, .access_key_id = "anonymous", .job_name = ""};
  }
  const auto& metadata = context.client_metadata();
  auto found = metadata.find("authorization");
  absl::StatusOr<auth::Principal> principal;
  std::string claimed = "-";
  if (found != metadata.end()) {
    const absl::string_view value(found->second.data(), found->second.size());
    claimed = ClaimedKeyId(value);
    principal = authenticator->AuthenticateBearer(value);
  } else if (std::string common_name = PeerCommonName(context); !common_name.empty()) {
    claimed = "cn:" + common_name;
    principal = authenticator->AuthenticateCertificate(common_name);
  } else {
    principal = authenticator->AuthenticateBearer("");
  }
  if (!principal.ok()) {
    spdlog::warn("refused {}: unauthenticated (key {}, peer {}): {}", std::string(method), claimed,
                 context.peer(), std::string(principal.status().message()));
  }
  return principal;
}

absl::Status AuthorizeCall(const auth::Principal& principal, const grpc::ServerContextBase& context,
                           absl::string_view method, auth::Action action,
                           absl::string_view job_name) {
  absl::Status allowed = auth::Authorize(principal, action, job_name);
  if (!allowed.ok()) {
    spdlog::warn("refused {}: permission denied (key {}, peer {}): {}", std::string(method),
                 principal.access_key_id, context.peer(), std::string(allowed.message()));
  }
  return allowed;
}

}  // namespace debugplane::service
