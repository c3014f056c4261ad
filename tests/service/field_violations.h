// The field violations a refused call carries in its
// grpc-status-details-bin (a google.rpc.Status with google.rpc.BadRequest
// details), as the server's clients read them.

#ifndef DEBUGPLANE_TESTS_SERVICE_FIELD_VIOLATIONS_H_
#define DEBUGPLANE_TESTS_SERVICE_FIELD_VIOLATIONS_H_

#include <vector>

#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/support/status.h"

namespace debugplane::testing {

// Every BadRequest field violation in `status`'s details, in order; none
// when the details are absent or not a google.rpc.Status.
inline std::vector<google::rpc::BadRequest::FieldViolation> FieldViolations(
    const grpc::Status& status) {
  std::vector<google::rpc::BadRequest::FieldViolation> violations;
  google::rpc::Status details;
  if (!details.ParseFromString(status.error_details())) return violations;
  for (const auto& any : details.details()) {
    google::rpc::BadRequest bad_request;
    if (!any.UnpackTo(&bad_request)) continue;
    violations.insert(violations.end(), bad_request.field_violations().begin(),
                      bad_request.field_violations().end());
  }
  return violations;
}

}  // namespace debugplane::testing

#endif  // DEBUGPLANE_TESTS_SERVICE_FIELD_VIOLATIONS_H_
