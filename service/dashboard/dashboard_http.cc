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

// The HTTP status of each status code; 500 for any other.
constexpr std::pair<absl::StatusCode, int> kHttpStatuses[] = {
    {absl::StatusCode::kOk, 200},
    {absl::StatusCode::kInvalidArgument, 400},
    {absl::StatusCode::kOutOfRange, 400},
    {absl::StatusCode::kUnauthenticated, 401},
    {absl::StatusCode::kPermissionDenied, 403},
    {absl::StatusCode::kNotFound, 404},
    {absl::StatusCode::kAlreadyExists, 409},
    {absl::StatusCode::kFailedPrecondition, 409},
    {absl::StatusCode::kAborted, 409},
    {absl::StatusCode::kResourceExhausted, 429},
    {absl::StatusCode::kUnavailable, 503},
};

int HttpStatusOf(absl::StatusCode code) {
  for (const auto& [status_code, http_status] : kHttpStatuses) {
    if (status_code == code) return http_status;
  }
  return 500;
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
