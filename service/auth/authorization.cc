// Roles, actions and Authorize (declared in auth.h).

#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/auth/auth.h"

namespace debugplane::service::auth {
namespace {

// What a reader may do; operators and admins may too.
bool IsRead(Action action) {
  switch (action) {
    case Action::kDescribeTrainingJob:
    case Action::kListTrainingJobs:
    case Action::kWatchTrainingJob:
    case Action::kGetProfilerReport:
    case Action::kQueryTensors:
      return true;
    default:
      return false;
  }
}

absl::Status Denied(const Principal& principal, Action action, absl::string_view why) {
  absl::Status status = absl::PermissionDeniedError(
      absl::StrCat("access key '", principal.access_key_id, "' (role ", RoleName(principal.role),
                   ") may not ", ActionName(action), ": ", why));
  SetAwsErrorCode(status, "AccessDeniedException");
  return status;
}

// The roles that would allow `action`, for the refusal.
absl::string_view RolesAllowing(Action action) {
  if (action == Action::kAgent) return "it needs role agent or admin";
  if (IsRead(action)) return "it needs role reader, operator or admin";
  return "it needs role operator or admin";
}

}  // namespace

absl::string_view RoleName(Role role) {
  // In the order of the enum.
  constexpr absl::string_view kNames[] = {"admin", "operator", "reader", "agent"};
  const auto index = static_cast<size_t>(role);
  return index < std::size(kNames) ? kNames[index] : "unknown";
}

absl::string_view ActionName(Action action) {
  constexpr std::pair<Action, absl::string_view> kNames[] = {
      {Action::kCreateTrainingJob, "CreateTrainingJob"},
      {Action::kDescribeTrainingJob, "DescribeTrainingJob"},
      {Action::kListTrainingJobs, "ListTrainingJobs"},
      {Action::kUpdateTrainingJob, "UpdateTrainingJob"},
      {Action::kStopTrainingJob, "StopTrainingJob"},
      {Action::kDeleteTrainingJob, "DeleteTrainingJob"},
      {Action::kWatchTrainingJob, "WatchTrainingJob"},
      {Action::kGetProfilerReport, "GetProfilerReport"},
      {Action::kQueryTensors, "TensorQueryService"},
      {Action::kAgent, "TrainingAgentService"},
  };
  for (const auto& [named, name] : kNames) {
    if (named == action) return name;
  }
  return "unknown";
}

absl::Status Authorize(const Principal& principal, Action action, absl::string_view job_name) {
  switch (principal.role) {
    case Role::kAdmin:
      return absl::OkStatus();
    case Role::kOperator:
      if (action == Action::kAgent) return Denied(principal, action, RolesAllowing(action));
      return absl::OkStatus();
    case Role::kReader:
      if (IsRead(action)) return absl::OkStatus();
      return Denied(principal, action, RolesAllowing(action));
    case Role::kAgent:
      if (action != Action::kAgent) return Denied(principal, action, RolesAllowing(action));
      if (!principal.job_name.empty() && principal.job_name != job_name) {
        return Denied(principal, action,
                      absl::StrCat("it is bound to training job '", principal.job_name, "', not '",
                                   job_name, "'"));
      }
      return absl::OkStatus();
  }
  return Denied(principal, action, "unknown role");
}

}  // namespace debugplane::service::auth
