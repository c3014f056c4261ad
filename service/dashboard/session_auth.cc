#include "service/dashboard/session_auth.h"

#include <openssl/crypto.h>

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "service/auth/sigv4.h"
#include "service/http/client_rate_limiter.h"

namespace debugplane::service::dashboard {
namespace {

bool TokensEqual(absl::string_view a, absl::string_view b) {
  const std::string digest_a = auth::Sha256Hex(a);
  const std::string digest_b = auth::Sha256Hex(b);
  return CRYPTO_memcmp(digest_a.data(), digest_b.data(), digest_a.size()) == 0;
}

absl::Status AgentRefused(const auth::Principal& principal) {
  return absl::PermissionDeniedError(
      absl::StrCat("access key '", principal.access_key_id,
                   "' (role agent) may not use the dashboard: it needs role reader, operator or "
                   "admin"));
}

}  // namespace

std::string CookieValue(const http::HttpRequest& request, absl::string_view name) {
  for (const auto& [header, value] : request.headers) {
    if (!absl::EqualsIgnoreCase(header, "Cookie")) continue;
    for (absl::string_view pair : absl::StrSplit(value, ';')) {
      pair = absl::StripAsciiWhitespace(pair);
      const size_t equals = pair.find('=');
      if (equals == absl::string_view::npos) continue;
      if (pair.substr(0, equals) == name) return std::string(pair.substr(equals + 1));
    }
  }
  return "";
}

bool ChangesState(absl::string_view method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE";
}

SessionAuth::SessionAuth(const auth::Authenticator* authenticator,
                         std::shared_ptr<auth::CredentialStore> credentials, SessionStore* sessions,
                         bool tls)
    : authenticator_(authenticator),
      credentials_(std::move(credentials)),
      sessions_(sessions),
      tls_(tls),
      anonymous_csrf_token_(RandomToken()) {}

absl::StatusOr<Caller> SessionAuth::Identify(const http::HttpRequest& request) const {
  if (!authenticator_->enabled()) {
    return Caller{.principal = {.role = auth::Role::kAdmin, .access_key_id = "anonymous"},
                  .via = Caller::Via::kAnonymous,
                  .csrf_token = anonymous_csrf_token_};
  }
  if (absl::string_view header = request.Header("Authorization"); !header.empty()) {
    absl::StatusOr<auth::Principal> principal = authenticator_->AuthenticateBearer(header);
    if (!principal.ok()) {
      absl::Status refused = principal.status();
      http::MarkCredentialRefused(refused);
      return refused;
    }
    if (principal->role == auth::Role::kAgent) return AgentRefused(*principal);
    return Caller{.principal = *std::move(principal), .via = Caller::Via::kBearer};
  }
  const std::string session_id = CookieValue(request, kSessionCookie);
  if (session_id.empty()) {
    return absl::UnauthenticatedError(
        "not signed in: POST /api/session with {\"token\": \"ACCESS_KEY_ID:SECRET\"}, or send "
        "'Authorization: Bearer ACCESS_KEY_ID:SECRET'");
  }
  std::optional<Session> session = sessions_->Find(session_id);
  if (!session.has_value()) {
    return absl::UnauthenticatedError("the session expired or the server restarted: sign in again");
  }
  // The role as the credentials file says now.
  std::shared_ptr<const auth::CredentialSet> credentials = credentials_->Snapshot();
  auto found = credentials->keys.find(session->access_key_id);
  if (found == credentials->keys.end() ||
      !TokensEqual(auth::Sha256Hex(found->second.secret_access_key), session->secret_digest)) {
    sessions_->Remove(session_id);
    return absl::UnauthenticatedError(
        absl::StrCat("access key '", session->access_key_id,
                     "' was removed or its secret changed: sign in again"));
  }
  auth::Principal principal{.role = found->second.role,
                            .access_key_id = found->second.access_key_id,
                            .job_name = found->second.job_name};
  if (principal.role == auth::Role::kAgent) return AgentRefused(principal);
  return Caller{.principal = std::move(principal),
                .via = Caller::Via::kSession,
                .csrf_token = session->csrf_token,
                .session_id = session_id};
}

absl::StatusOr<auth::Principal> SessionAuth::Authenticate(const http::HttpRequest& request) const {
  absl::StatusOr<Caller> caller = Identify(request);
  if (!caller.ok()) return caller.status();
  return std::move(caller->principal);
}

absl::StatusOr<auth::Principal> SessionAuth::Check(const http::HttpRequest& request,
                                                   auth::Action action,
                                                   absl::string_view job_name) const {
  absl::StatusOr<Caller> caller = Identify(request);
  if (!caller.ok()) return caller.status();
  if (absl::Status allowed = auth::Authorize(caller->principal, action, job_name); !allowed.ok()) {
    return allowed;
  }
  if (ChangesState(request.method)) {
    if (absl::Status cross_site = CheckCrossSite(request, *caller); !cross_site.ok()) {
      return cross_site;
    }
  }
  return std::move(caller->principal);
}

absl::Status SessionAuth::CheckCrossSite(const http::HttpRequest& request,
                                         const Caller& caller) const {
  // A browser never attaches an Authorization header by itself.
  if (caller.via == Caller::Via::kBearer) return absl::OkStatus();
  const absl::string_view sent = request.Header("X-CSRF-Token");
  if (sent.empty()) {
    return absl::PermissionDeniedError(
        "the X-CSRF-Token header is missing: send the csrfToken of GET /api/session");
  }
  if (!TokensEqual(sent, caller.csrf_token)) {
    return absl::PermissionDeniedError(
        "the X-CSRF-Token header is not this session's csrfToken (see GET /api/session)");
  }
  return CheckOrigin(request);
}

absl::Status SessionAuth::CheckOrigin(const http::HttpRequest& request) const {
  const absl::string_view origin = request.Header("Origin");
  if (origin.empty()) return absl::OkStatus();
  const std::string own = absl::StrCat(tls_ ? "https://" : "http://", request.Header("Host"));
  if (!absl::EqualsIgnoreCase(origin, own)) {
    std::string shown(origin.substr(0, 100));
    for (char& c : shown) {
      if (!absl::ascii_isprint(static_cast<unsigned char>(c))) c = '?';
    }
    return absl::PermissionDeniedError(absl::StrCat("cross-site request refused: Origin '", shown,
                                                    "' is not this server's origin ", own));
  }
  return absl::OkStatus();
}

absl::StatusOr<Session> SessionAuth::SignIn(absl::string_view token) const {
  if (!authenticator_->enabled()) {
    return absl::FailedPreconditionError(
        "this server has no --credentials: nobody needs to sign in");
  }
  token = absl::StripAsciiWhitespace(token);
  absl::StatusOr<auth::Principal> principal =
      authenticator_->AuthenticateBearer(absl::StrCat("Bearer ", token));
  if (!principal.ok()) {
    absl::Status refused = principal.status();
    http::MarkCredentialRefused(refused);
    return refused;
  }
  if (principal->role == auth::Role::kAgent) return AgentRefused(*principal);
  const std::string secret(token.substr(token.find(':') + 1));
  return sessions_->Create(principal->access_key_id, auth::Sha256Hex(secret));
}

}  // namespace debugplane::service::dashboard
