#include "service/dashboard/dashboard_http.h"

#include <utility>

#include "nlohmann/json.hpp"
#include "service/http/client_rate_limiter.h"

namespace debugplane::service::dashboard {
namespace {

constexpr char kContentSecurityPolicy[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'";

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

}  // namespace

void AddSecurityHeaders(http::HttpHeaders& headers) {
  headers.emplace_back("Content-Security-Policy", kContentSecurityPolicy);
  headers.emplace_back("X-Content-Type-Options", "nosniff");
  headers.emplace_back("Referrer-Policy", "no-referrer");
}

http::HttpResponse JsonResponse(int status, std::string json) {
  http::HttpResponse response{.status = status,
                              .headers = {{"Content-Type", "application/json; charset=utf-8"},
                                          {"Cache-Control", "no-store"}},
                              .body = std::move(json)};
  AddSecurityHeaders(response.headers);
  return response;
}

http::HttpResponse JsonErrorResponse(const absl::Status& status, absl::string_view field) {
  nlohmann::json body = {{"error", std::string(status.message())}};
  if (!field.empty()) body["field"] = std::string(field);
  // Messages may quote caller input: invalid UTF-8 is replaced, never thrown.
  http::HttpResponse response =
      JsonResponse(HttpStatusOf(status.code()),
                   body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  response.failed_authentication = http::CredentialRefused(status);
  return response;
}

}  // namespace debugplane::service::dashboard
