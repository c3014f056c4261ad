// SageMaker's JSON (AWS JSON 1.1, as botocore writes and reads it) <-> the
// debugplane.v1 messages, driven by the message descriptors: a member is the
// field whose json_name it is (the proto's json_names are SageMaker's member
// names), Timestamps are epoch seconds (JSON numbers, fractions allowed),
// integers of every width are JSON numbers, enums their value names.

#ifndef DEBUGPLANE_SERVICE_HTTP_SAGEMAKER_JSON_H_
#define DEBUGPLANE_SERVICE_HTTP_SAGEMAKER_JSON_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace debugplane::service::http {

// Parses a request body into `message` (cleared first). A null member counts
// as absent. On error returns INVALID_ARGUMENT carrying an AWS error code
// (auth::AwsErrorCode) and naming the member by its path, e.g.
// "ProfilerConfig.ProfilingIntervalInMilliseconds":
//   SerializationException: the body is not a JSON object, or a member has
//     the wrong JSON type (a string for an integer, a fraction for an
//     integer, an out-of-range number);
//   ValidationException: a member this API does not have (SageMaker members
//     debugplane does not implement included), an enum value not in the set.
// Values are never echoed beyond 64 characters.
absl::Status ParseSageMakerJson(absl::string_view body, google::protobuf::Message* message);

// The JSON of `message`: every field that is set (proto3 defaults omitted),
// maps as objects, Timestamps as epoch seconds. Thread-safe.
std::string ToSageMakerJson(const google::protobuf::Message& message);

}  // namespace debugplane::service::http

#endif  // DEBUGPLANE_SERVICE_HTTP_SAGEMAKER_JSON_H_
