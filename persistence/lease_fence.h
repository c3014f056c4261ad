// The refusal of a fenced write (CheckLease in a WriteBatch, storage.h), the
// same from every engine, and how a caller tells it from other failures.

#ifndef DEBUGPLANE_PERSISTENCE_LEASE_FENCE_H_
#define DEBUGPLANE_PERSISTENCE_LEASE_FENCE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "persistence/storage.h"

namespace debugplane::persistence {

// The lease row as the fenced transaction found it.
struct FoundLease {
  std::string owner;
  int64_t token = 0;
};

// OK if `found` is `fence`'s owner and token; else FAILED_PRECONDITION
// naming the job, the fence's owner and token and what the database holds
// (or that it holds no lease of the job), with payload kLeaseFencePayload.
absl::Status CheckFence(const CheckLease& fence, const std::optional<FoundLease>& found);

// The job whose lease fence refused a batch, if `status` is such a refusal.
std::optional<std::string> FencedJob(const absl::Status& status);

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_LEASE_FENCE_H_
