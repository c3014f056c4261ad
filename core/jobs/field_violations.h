// Builds INVALID_ARGUMENT statuses that name every bad field.
//
// The status carries a google.rpc.BadRequest as a payload under
// kBadRequestTypeUrl; the gRPC adapter turns it into the standard
// grpc-status-details-bin trailer, so clients see one violation per field.

#ifndef DEBUGPLANE_CORE_JOBS_FIELD_VIOLATIONS_H_
#define DEBUGPLANE_CORE_JOBS_FIELD_VIOLATIONS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace debugplane::core {

inline constexpr absl::string_view kBadRequestTypeUrl = "type.googleapis.com/google.rpc.BadRequest";

struct FieldViolation {
  std::string field;        // e.g. "DebugRuleConfigurations[2].RuleParameters".
  std::string description;  // What is wrong and what is allowed.
};

// Accumulates violations. Not thread-safe.
class FieldViolations {
 public:
  void Add(std::string field, std::string description);
  bool empty() const { return violations_.empty(); }
  const std::vector<FieldViolation>& violations() const { return violations_; }

  // OK when empty; otherwise INVALID_ARGUMENT whose message lists every
  // violation ("TrainingJobName: must match ...; ...") and whose payload is
  // the serialized google.rpc.BadRequest.
  absl::Status ToStatus() const;

 private:
  std::vector<FieldViolation> violations_;
};

// Shorthand for a status with a single violation.
absl::Status InvalidField(std::string field, std::string description);

// The violations carried by `status` (empty if it carries none).
std::vector<FieldViolation> FieldViolationsOf(const absl::Status& status);

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_JOBS_FIELD_VIOLATIONS_H_
