#include "client/common/grpc_errors.h"

#include <array>

#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace debugplane::client {
namespace {

struct CodeInfo {
  grpc::StatusCode code;
  const char* name;
  int exit_code;
};

// The one place that decides what scripts see. Codes a script can act on get
// their own exit code; the rest are "something else went wrong".
constexpr std::array<CodeInfo, 17> kExitCodeTable = {{
    {grpc::StatusCode::OK, "OK", kExitOk},
    {grpc::StatusCode::CANCELLED, "CANCELLED", kExitError},
    {grpc::StatusCode::UNKNOWN, "UNKNOWN", kExitError},
    {grpc::StatusCode::INVALID_ARGUMENT, "INVALID_ARGUMENT", kExitInvalidArgument},
    {grpc::StatusCode::DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED", kExitUnavailable},
    {grpc::StatusCode::NOT_FOUND, "NOT_FOUND", kExitNotFound},
    {grpc::StatusCode::ALREADY_EXISTS, "ALREADY_EXISTS", kExitAlreadyExists},
    {grpc::StatusCode::PERMISSION_DENIED, "PERMISSION_DENIED", kExitNotAllowed},
    {grpc::StatusCode::RESOURCE_EXHAUSTED, "RESOURCE_EXHAUSTED", kExitError},
    {grpc::StatusCode::FAILED_PRECONDITION, "FAILED_PRECONDITION", kExitFailedPrecondition},
    {grpc::StatusCode::ABORTED, "ABORTED", kExitError},
    {grpc::StatusCode::OUT_OF_RANGE, "OUT_OF_RANGE", kExitError},
    {grpc::StatusCode::UNIMPLEMENTED, "UNIMPLEMENTED", kExitError},
    {grpc::StatusCode::INTERNAL, "INTERNAL", kExitError},
    {grpc::StatusCode::UNAVAILABLE, "UNAVAILABLE", kExitUnavailable},
    {grpc::StatusCode::DATA_LOSS, "DATA_LOSS", kExitError},
    {grpc::StatusCode::UNAUTHENTICATED, "UNAUTHENTICATED", kExitNotAllowed},
}};

const CodeInfo* FindCode(grpc::StatusCode code) {
  for (const CodeInfo& info : kExitCodeTable) {
    if (info.code == code) return &info;
  }
  return nullptr;
}

// Appends one line per violation carried in the grpc-status-details-bin
// trailer. A trailer that does not parse is ignored: the code and message
// already say what happened, and the details are a refinement.
void AppendDetails(const std::string& serialized, std::string* out) {
  if (serialized.empty()) return;
  google::rpc::Status details;
  if (!details.ParseFromString(serialized)) return;
  for (const google::protobuf::Any& any : details.details()) {
    if (google::rpc::BadRequest bad_request; any.UnpackTo(&bad_request)) {
      for (const auto& violation : bad_request.field_violations()) {
        absl::StrAppend(out, "  - ", violation.field(), ": ", violation.description(), "\n");
      }
    } else if (google::rpc::PreconditionFailure failure; any.UnpackTo(&failure)) {
      for (const auto& violation : failure.violations()) {
        absl::StrAppend(out, "  - ", violation.subject(), ": ", violation.description(), "\n");
      }
    }
  }
}

}  // namespace

int ExitCodeForGrpcStatus(grpc::StatusCode code) {
  const CodeInfo* info = FindCode(code);
  return info == nullptr ? kExitError : info->exit_code;
}

std::string GrpcCodeName(grpc::StatusCode code) {
  const CodeInfo* info = FindCode(code);
  if (info == nullptr) return absl::StrCat("CODE(", static_cast<int>(code), ")");
  return info->name;
}

std::string FormatGrpcError(const grpc::Status& status, absl::string_view server) {
  std::string out = absl::StrCat("error: ", GrpcCodeName(status.error_code()));
  if (!status.error_message().empty()) absl::StrAppend(&out, ": ", status.error_message());
  absl::StrAppend(&out, "\n");
  AppendDetails(status.error_details(), &out);
  if (!server.empty()) {
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      absl::StrAppend(&out, "  (is debugplane-server running at ", server,
                      "? Set --server or DEBUGPLANE_SERVER.)\n");
    } else if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      absl::StrAppend(&out, "  (", server,
                      " requires an access key: give --token ACCESS_KEY_ID:SECRET, "
                      "DEBUGPLANE_TOKEN or --token-file FILE, with a key from the server's "
                      "--credentials file.)\n");
    } else if (status.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
      absl::StrAppend(&out,
                      "  (the access key is valid but its role does not allow this; use a "
                      "key with the role named above.)\n");
    } else if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      absl::StrAppend(&out, "  (no answer from ", server,
                      " in time; a longer --timeout may help.)\n");
    }
  }
  return out;
}

std::string FormatLocalError(const absl::Status& status) {
  return absl::StrCat("error: ", status.message(), "\n");
}

}  // namespace debugplane::client
