// AwsErrorCode / SetAwsErrorCode (declared in auth.h): the code travels as a
// status payload, so it survives being passed between layers unchanged.

#include "absl/strings/cord.h"
#include "service/auth/auth.h"

namespace debugplane::service::auth {
namespace {

constexpr absl::string_view kPayloadUrl = "type.debugplane.dev/aws-error-code";

}  // namespace

std::optional<std::string> AwsErrorCode(const absl::Status& status) {
  auto payload = status.GetPayload(kPayloadUrl);
  if (!payload.has_value()) return std::nullopt;
  return std::string(*payload);
}

void SetAwsErrorCode(absl::Status& status, absl::string_view code) {
  status.SetPayload(kPayloadUrl, absl::Cord(code));
}

}  // namespace debugplane::service::auth
