// The AWS JSON 1.1 error replies of the SageMaker protocol: which `__type`
// and HTTP status a refused request gets, as botocore parses them (the
// `__type` is the error code boto3 raises, `message` its message).
//
//   status (absl)          AWS error code                 HTTP
//   carries AwsErrorCode   that code (auth, JSON)         see AwsErrorStatus
//   INVALID_ARGUMENT       ValidationException            400
//   FAILED_PRECONDITION    ValidationException            400
//   OUT_OF_RANGE           ValidationException            400
//   NOT_FOUND              ResourceNotFound               400
//   ALREADY_EXISTS         ResourceInUse                  400
//   RESOURCE_EXHAUSTED     ResourceLimitExceeded          400
//   UNAUTHENTICATED        UnrecognizedClientException    400
//   PERMISSION_DENIED      AccessDeniedException          400
//   UNAVAILABLE            ServiceUnavailable             503
//   DEADLINE_EXCEEDED      ThrottlingException            400
//   anything else          InternalFailure                500
//
// The message is the status's own (the same text a gRPC client sees: it
// names the field).

#ifndef DEBUGPLANE_SERVICE_HTTP_AWS_ERRORS_H_
#define DEBUGPLANE_SERVICE_HTTP_AWS_ERRORS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "service/http/http_server.h"

namespace debugplane::service::http {

struct AwsError {
  int http_status = 500;
  std::string code;  // e.g. "ValidationException"
  std::string message;
};

// REQUIRES: !status.ok().
AwsError ToAwsError(const absl::Status& status);

// The HTTP status AWS answers a given error code with (400 for client
// errors, 403 for a missing signature, 503/500 for server errors).
int AwsErrorStatus(absl::string_view code);

// {"__type": CODE, "message": MESSAGE} with the status, Content-Type
// application/x-amz-json-1.1 and x-amzn-ErrorType.
HttpResponse AwsErrorResponse(const AwsError& error);

}  // namespace debugplane::service::http

#endif  // DEBUGPLANE_SERVICE_HTTP_AWS_ERRORS_H_
