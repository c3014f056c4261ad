// Reading request messages from JSON files written for the SageMaker CLI.
//
// `aws sagemaker create-training-job --cli-input-json` templates in the
// SageMaker documentation carry `//` comments, which neither JSON nor
// protobuf's JSON parser allows. The input is therefore parsed with
// nlohmann::json (comments ignored), re-serialized as plain JSON and only
// then mapped onto the message with protobuf's JSON parser, which accepts
// the json_name (SageMaker member name) of every field.
//
// Every error names its source (the file name, or "<stdin>") and says where
// the problem is: a line and column for syntax errors, the field path (e.g.
// "DebugRuleConfigurations[0].RuleParamters") for unknown members.

#ifndef DEBUGPLANE_CLIENT_CLI_JSON_INPUT_H_
#define DEBUGPLANE_CLIENT_CLI_JSON_INPUT_H_

#include <istream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/common/read_input.h"
#include "google/protobuf/message.h"

namespace debugplane::client {

// The name errors use for `path`: "<stdin>" for "-", else `path` itself.
std::string InputDisplayName(absl::string_view path);

// ReadInput: client/common/read_input.h.

// Parses JSON that may contain `//` and `/* */` comments and returns it as
// plain compact JSON. INVALID_ARGUMENT, with line and column, if it is not
// JSON, or if it nests arrays and objects more than 100 levels deep (no
// request does; refused while parsing, so no input can exhaust the stack);
// `source` names the input in the message.
absl::StatusOr<std::string> StripJsonComments(absl::string_view text, absl::string_view source);

// Options of ParseJsonMessage.
struct JsonInputOptions {
  // Drop members the message does not have instead of failing; for JSON
  // written for a newer SageMaker API than debugplane mirrors.
  bool ignore_unknown_fields = false;
};

// Replaces the content of `message` with `text` (JSON, comments allowed).
// INVALID_ARGUMENT if the text is not JSON (or is nested too deep, as in
// StripJsonComments), is not an object, has members
// the message does not have (each named by its path) or has values of the
// wrong type (protobuf's message). `source` names the input in messages.
absl::Status ParseJsonMessage(absl::string_view text, absl::string_view source,
                              google::protobuf::Message* message,
                              const JsonInputOptions& options = {});

// ReadInput followed by ParseJsonMessage, using InputDisplayName(path) as
// the source.
absl::Status ReadJsonMessage(absl::string_view path, std::istream& stdin_stream,
                             google::protobuf::Message* message,
                             const JsonInputOptions& options = {});

}  // namespace debugplane::client

#endif  // DEBUGPLANE_CLIENT_CLI_JSON_INPUT_H_
