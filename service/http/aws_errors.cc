#include "service/http/aws_errors.h"

#include "nlohmann/json.hpp"
#include "service/auth/auth.h"

namespace debugplane::service::http {
namespace {

absl::string_view CodeFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return "ValidationException";
    case absl::StatusCode::kNotFound:
      return "ResourceNotFound";
    case absl::StatusCode::kAlreadyExists:
      return "ResourceInUse";
    case absl::StatusCode::kResourceExhausted:
      return "ResourceLimitExceeded";
    case absl::StatusCode::kUnauthenticated:
      return "UnrecognizedClientException";
    case absl::StatusCode::kPermissionDenied:
      return "AccessDeniedException";
    case absl::StatusCode::kUnavailable:
      return "ServiceUnavailable";
    default:
      return "InternalFailure";
  }
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
