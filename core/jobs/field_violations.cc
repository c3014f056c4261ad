#include "core/jobs/field_violations.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"

namespace debugplane::core {

void FieldViolations::Add(std::string field, std::string description) {
  violations_.push_back({std::move(field), std::move(description)});
}

absl::Status FieldViolations::ToStatus() const {
  if (violations_.empty()) return absl::OkStatus();
  google::rpc::BadRequest bad_request;
  std::string message;
  for (const FieldViolation& v : violations_) {
    auto* fv = bad_request.add_field_violations();
    fv->set_field(v.field);
    fv->set_description(v.description);
    absl::StrAppend(&message, message.empty() ? "" : "; ", v.field, ": ", v.description);
  }
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kBadRequestTypeUrl, absl::Cord(bad_request.SerializeAsString()));
  return status;
}

absl::Status InvalidField(std::string field, std::string description) {
  FieldViolations violations;
  violations.Add(std::move(field), std::move(description));
  return violations.ToStatus();
}

std::vector<FieldViolation> FieldViolationsOf(const absl::Status& status) {
  std::vector<FieldViolation> result;
  absl::optional<absl::Cord> payload = status.GetPayload(kBadRequestTypeUrl);
  if (!payload.has_value()) return result;
  google::rpc::BadRequest bad_request;
  if (!bad_request.ParseFromString(std::string(*payload))) return result;
  for (const auto& fv : bad_request.field_violations()) {
    result.push_back({fv.field(), fv.description()});
  }
  return result;
}

}  // namespace debugplane::core
