#include "service/http/aws_errors.h"

#include <utility>

#include "nlohmann/json.hpp"
#include "service/auth/auth.h"

namespace debugplane::service::http {
namespace {

// The AWS error code of each status code.
constexpr std::pair<absl::StatusCode, absl::string_view> kAwsCodes[] = {
    {absl::StatusCode::kInvalidArgument, "ValidationException"},
    {absl::StatusCode::kFailedPrecondition, "ValidationException"},
    {absl::StatusCode::kOutOfRange, "ValidationException"},
    {absl::StatusCode::kNotFound, "ResourceNotFound"},
    {absl::StatusCode::kAlreadyExists, "ResourceInUse"},
    {absl::StatusCode::kResourceExhausted, "ResourceLimitExceeded"},
    {absl::StatusCode::kUnauthenticated, "UnrecognizedClientException"},
    {absl::StatusCode::kPermissionDenied, "AccessDeniedException"},
    {absl::StatusCode::kUnavailable, "ServiceUnavailable"},
};

// kAwsCodes' code for `code`; InternalFailure for any other.
absl::string_view CodeFor(absl::StatusCode code) {
  for (const auto& [status_code, aws_code] : kAwsCodes) {
    if (status_code == code) return aws_code;
  }
  return "InternalFailure";
}

}  // namespace

int AwsErrorStatus(absl::string_view code) {
  if (code == "InternalFailure") return 500;
  if (code == "ServiceUnavailable") return 503;
  // AWS answers an unsigned request 403; every other client error 400.
  if (code == "MissingAuthenticationTokenException") return 403;
  return 400;
}

AwsError ToAwsError(const absl::Status& status) {
  std::string code = auth::AwsErrorCode(status).value_or(std::string(CodeFor(status.code())));
  const int http_status = AwsErrorStatus(code);
  return AwsError{.http_status = http_status,
                  .code = std::move(code),
                  .message = std::string(status.message())};
}

HttpResponse AwsErrorResponse(const AwsError& error) {
  nlohmann::json body = {{"__type", error.code}, {"message", error.message}};
  return HttpResponse{
      .status = error.http_status,
      .headers = {{"Content-Type", "application/x-amz-json-1.1"}, {"x-amzn-ErrorType", error.code}},
      .body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
}

}  // namespace debugplane::service::http
