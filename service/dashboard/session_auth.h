// DashboardAuth (dashboard_http.h) over the server's credentials: sign-in
// with a bearer token into a SessionStore, then the dp_session cookie; or an
// `Authorization: Bearer` header on each request; or, without --credentials,
// the anonymous admin.

#ifndef DEBUGPLANE_SERVICE_DASHBOARD_SESSION_AUTH_H_
#define DEBUGPLANE_SERVICE_DASHBOARD_SESSION_AUTH_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/auth/auth.h"
#include "service/auth/credential_store.h"
#include "service/dashboard/dashboard_http.h"
#include "service/dashboard/session_store.h"

namespace debugplane::service::dashboard {

inline constexpr absl::string_view kSessionCookie = "dp_session";

// Who a request is, and how it said so.
struct Caller {
  auth::Principal principal;
  enum class Via { kAnonymous, kSession, kBearer } via = Via::kAnonymous;
  // The CSRF token state-changing requests must carry: the session's, or,
  // without credentials, the server's anonymous one; empty for a bearer.
  std::string csrf_token;
  std::string session_id;  // kSession only.
};

// The value of cookie `name` in the request's Cookie headers, or "".
std::string CookieValue(const http::HttpRequest& request, absl::string_view name);

// True for POST, PUT, PATCH and DELETE.
bool ChangesState(absl::string_view method);

// Thread-safe; never blocks (snapshots and short mutexes only).
class SessionAuth final : public DashboardAuth {
 public:
  // `credentials` null exactly when `authenticator` is not enabled.
  // `tls`: the listener serves HTTPS (its own origin is https://HOST).
  // REQUIRES: `authenticator` and `sessions` outlive this object.
  SessionAuth(const auth::Authenticator* authenticator,
              std::shared_ptr<auth::CredentialStore> credentials, SessionStore* sessions, bool tls);

  absl::StatusOr<auth::Principal> Authenticate(const http::HttpRequest& request) const override;
  absl::StatusOr<auth::Principal> Check(const http::HttpRequest& request, auth::Action action,
                                        absl::string_view job_name) const override;

  // As Authenticate, with how the caller was identified.
  absl::StatusOr<Caller> Identify(const http::HttpRequest& request) const;

  // Signs in with `token` ("KEY:SECRET"): a new session, or
  // UNAUTHENTICATED (a wrong or unknown key, never echoing the secret),
  // PERMISSION_DENIED for an agent, FAILED_PRECONDITION without credentials
  // (nobody needs to sign in).
  absl::StatusOr<Session> SignIn(absl::string_view token) const;

  // The cross-site checks for a state-changing request of `caller` (see
  // DashboardAuth::Check): OK, or PERMISSION_DENIED naming what failed.
  absl::Status CheckCrossSite(const http::HttpRequest& request, const Caller& caller) const;

  // An Origin header equal to this listener's own origin, or none.
  absl::Status CheckOrigin(const http::HttpRequest& request) const;

  bool enabled() const { return authenticator_->enabled(); }
  bool tls() const { return tls_; }
  SessionStore& sessions() const { return *sessions_; }

 private:
  const auth::Authenticator* const authenticator_;
  const std::shared_ptr<auth::CredentialStore> credentials_;
  SessionStore* const sessions_;
  const bool tls_;
  // Without credentials: the token every state-changing request carries,
  // so that another site's page cannot drive the loopback server.
  const std::string anonymous_csrf_token_;
};

}  // namespace debugplane::service::dashboard

#endif  // DEBUGPLANE_SERVICE_DASHBOARD_SESSION_AUTH_H_
