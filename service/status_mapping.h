// absl::Status -> grpc::Status, keeping rich error details.

#ifndef DEBUGPLANE_SERVICE_STATUS_MAPPING_H_
#define DEBUGPLANE_SERVICE_STATUS_MAPPING_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace debugplane::service {

// The same code and message; payloads that are google.rpc error details
// (e.g. the google.rpc.BadRequest of core::FieldViolations) travel as a
// serialized google.rpc.Status in the grpc-status-details-bin trailer.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace debugplane::service

#endif  // DEBUGPLANE_SERVICE_STATUS_MAPPING_H_
