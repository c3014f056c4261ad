#include "persistence/lease_fence.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace debugplane::persistence {

absl::Status CheckFence(const CheckLease& fence, const std::optional<FoundLease>& found) {
  if (found.has_value() && found->owner == fence.owner && found->token == fence.token) {
    return absl::OkStatus();
  }
  const std::string held =
      found.has_value()
          ? absl::StrCat("the database holds token ", found->token, " of '", found->owner, "'")
          : std::string("the database holds no lease of the job");
  absl::Status refused = absl::FailedPreconditionError(absl::StrCat(
      "stale evaluation lease of job '", fence.job_name, "': replica '", fence.owner,
      "' wrote with fencing token ", fence.token, ", but ", held, "; the batch was not applied"));
  refused.SetPayload(kLeaseFencePayload, absl::Cord(fence.job_name));
  return refused;
}

std::optional<std::string> FencedJob(const absl::Status& status) {
  auto job = status.GetPayload(kLeaseFencePayload);
  if (!job.has_value()) return std::nullopt;
  return std::string(*job);
}

}  // namespace debugplane::persistence
