// Minimal implementations of dashboard_http.h's JSON replies, written by the
// insights routes' helper before the dashboard server (branch dash) landed;
// the lead keeps one of the two.

#include "service/dashboard/dashboard_http.h"

#include <utility>

#include "nlohmann/json.hpp"

namespace debugplane::service::dashboard {

void AddSecurityHeaders(http::HttpHeaders& headers) {
  headers.emplace_back("Content-Security-Policy",
                       "default-src 'none'; script-src 'self'; style-src 'self'; "
                       "img-src 'self' data:; connect-src 'self'; font-src 'self'; "
                       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'");
  headers.emplace_back("X-Content-Type-Options", "nosniff");
  headers.emplace_back("Referrer-Policy", "no-referrer");
}

http::HttpResponse JsonResponse(int status, std::string json) {
  http::HttpResponse response;
  response.status = status;
  response.headers.emplace_back("Content-Type", "application/json");
  response.headers.emplace_back("Cache-Control", "no-store");
  AddSecurityHeaders(response.headers);
  response.body = std::move(json);
  return response;
}

http::HttpResponse JsonErrorResponse(const absl::Status& status, absl::string_view field) {
  int code = 500;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      code = 400;
      break;
    case absl::StatusCode::kUnauthenticated:
      code = 401;
      break;
    case absl::StatusCode::kPermissionDenied:
      code = 403;
      break;
    case absl::StatusCode::kNotFound:
      code = 404;
      break;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
      code = 409;
      break;
    case absl::StatusCode::kResourceExhausted:
      code = 429;
      break;
    case absl::StatusCode::kUnavailable:
      code = 503;
      break;
    default:
      break;
  }
  nlohmann::json body = {{"error", std::string(status.message())}};
  if (!field.empty()) body["field"] = std::string(field);
  return JsonResponse(code, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace debugplane::service::dashboard
