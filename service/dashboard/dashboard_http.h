// The dashboard's HTTP plumbing shared by its route files (docs/dashboard-api.md):
// who is asking (session cookie, bearer token, or nobody when the server has
// no credentials), whether they may, JSON replies with the security headers,
// and the table through which each area registers its /api/jobs/NAME/...
// resources.
//
// Route files: service/dashboard/*_routes.cc. Each builds JobResource
// entries; DashboardRoutes (dashboard_routes.h) turns them, the session, jobs,
// events and static routes into http::HttpRoute's for the server.

#ifndef DEBUGPLANE_SERVICE_DASHBOARD_DASHBOARD_HTTP_H_
#define DEBUGPLANE_SERVICE_DASHBOARD_DASHBOARD_HTTP_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/auth/auth.h"
#include "service/http/http_server.h"

namespace debugplane::service::dashboard {

// Authenticates and authorizes dashboard requests.
// Thread-safe: called from libmicrohttpd's threads; never blocks.
class DashboardAuth {
 public:
  virtual ~DashboardAuth() = default;

  // The principal behind `request`: its session cookie's, its
  // `Authorization: Bearer` token's, or an admin when the server has no
  // credentials. UNAUTHENTICATED (naming what is missing or wrong, never the
  // secret) when neither identifies anyone; PERMISSION_DENIED for an agent.
  virtual absl::StatusOr<auth::Principal> Authenticate(const http::HttpRequest& request) const = 0;

  // Authenticate, then auth::Authorize(principal, action, job_name), then,
  // for a state-changing method (POST, PUT, DELETE) of a cookie session,
  // the cross-site checks (X-CSRF-Token equals the session's; an Origin
  // header, if any, is the listener's own). PERMISSION_DENIED names the role
  // and action, or the failed cross-site check.
  virtual absl::StatusOr<auth::Principal> Check(const http::HttpRequest& request,
                                                auth::Action action,
                                                absl::string_view job_name) const = 0;
};

// Adds the headers every /dashboard/ and /api/ reply carries
// (Content-Security-Policy, X-Content-Type-Options, Referrer-Policy; see
// docs/dashboard-api.md).
void AddSecurityHeaders(http::HttpHeaders& headers);

// `json` (a complete JSON document) with status `status`, Content-Type
// application/json, Cache-Control no-store and the security headers.
http::HttpResponse JsonResponse(int status, std::string json);

// The error reply for `status`: {"error": message} (plus "field" when
// `field` is not empty) with the HTTP status that fits its code
// (INVALID_ARGUMENT 400, UNAUTHENTICATED 401, PERMISSION_DENIED 403,
// NOT_FOUND 404, ALREADY_EXISTS/FAILED_PRECONDITION 409, RESOURCE_EXHAUSTED
// 429, UNAVAILABLE 503, others 500). A status marked by
// http::MarkCredentialRefused marks the reply failed_authentication.
http::HttpResponse JsonErrorResponse(const absl::Status& status, absl::string_view field = "");

// A resource of one job: METHOD /api/jobs/NAME/<resource>. The router has
// checked, before calling `handler`, that the job exists and that the caller
// may perform `action` on it (DashboardAuth::Check). `handler` runs on a
// libmicrohttpd thread and must not block: work that reads files or waits
// goes to a pool, which answers through the responder.
struct JobResource {
  std::string method;    // "GET" or "POST".
  std::string resource;  // e.g. "overview", "system", "tensor".
  auth::Action action;   // What the caller must be allowed to do.
  std::function<void(http::HttpRequest request, std::string job_name, auth::Principal principal,
                     std::unique_ptr<http::HttpResponder> responder)>
      handler;
};

}  // namespace debugplane::service::dashboard

#endif  // DEBUGPLANE_SERVICE_DASHBOARD_DASHBOARD_HTTP_H_
