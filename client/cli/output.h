// How the CLI prints responses: JSON (the default, for scripts and for
// people used to `aws sagemaker`) or a short text form (for people).

#ifndef DEBUGPLANE_CLIENT_CLI_OUTPUT_H_
#define DEBUGPLANE_CLIENT_CLI_OUTPUT_H_

#include <string>

#include "debugplane/v1/tensor_query.pb.h"
#include "debugplane/v1/training_job.pb.h"
#include "google/protobuf/message.h"

namespace debugplane::client {

// JSON as SageMaker spells it: json_names (PascalCase members), enum value
// names, fields at their default value left out, and numbers as JSON
// numbers: 64-bit integers too ("LastEvaluatedStep": 149, where the gRPC
// JSON mapping that `buf curl` and grpcurl use writes "149"; values beyond
// 2^53 stay exact in the text). Non-finite floating-point values, which
// JSON cannot hold, are the strings "nan", "inf" and "-inf" (never "-nan").
// Strings stay strings, digits or not (RuleParameters: {"threshold": "10"}).
// The output parses back with protobuf's JSON parser, but for non-finite
// values (it wants "NaN"/"Infinity"; no API message has one). Indented by two
// spaces, ends with '\n'.
std::string ToPrettyJson(const google::protobuf::Message& message);

// The same on one line, ending with '\n' (one NDJSON record).
std::string ToJsonLine(const google::protobuf::Message& message);

// Text renderings, each ending with '\n'.
std::string DescribeAsText(const v1::DescribeTrainingJobResponse& job);
// A table: NAME STATUS SECONDARY CREATED.
std::string ListAsText(const v1::ListTrainingJobsResponse& page);
// One line per event: time, job status, then what changed.
std::string WatchEventAsText(const v1::WatchTrainingJobResponse& event);

// A table of a job's tensors: NAME COLLECTIONS MODES STEPS SHAPE, where
// MODES is "TRAIN:180 EVAL:20" (steps saved per mode), STEPS the first and
// last global step, SHAPE "float32[64,10]" ("float32[]" for a scalar).
std::string TensorsAsText(const v1::ListTensorsResponse& listing);
// One line for one point: step, mode, then the value of a scalar or
// mean/norm/min/max (and non-finite elements, if any); a bucket shows its
// steps as "A-B" and their count.
std::string TensorPointAsText(const v1::TensorPoint& point);

}  // namespace debugplane::client

#endif  // DEBUGPLANE_CLIENT_CLI_OUTPUT_H_
