// ActionOutbox: which replica carries out a rule action, claimed row by row.
//
// A rule's actions are written Pending in its job's record together with its
// IssuesFound (core/jobs/rule_actions.h); this table decides who delivers them
// when several replicas see them. A claim lasts until the database's now +
// claim_for: a replica killed while holding one leaves it to expire, and
// another then claims the action again (its idempotency key, the ActionId,
// stays the same). A delivered action is marked done and never claimed
// again. PostgreSQL claims with SELECT ... FOR UPDATE SKIP LOCKED, so
// claimers running at once never wait for each other and never get the same
// row; SQLite (one server) serializes claims in write transactions.
//
// Exactly once in the normal case; at least once across a crash: if a
// replica dies after the receiver accepted a delivery and before Complete
// committed, the action is delivered again with the same ActionId after the
// claim expires.

#ifndef DEBUGPLANE_PERSISTENCE_ACTION_OUTBOX_H_
#define DEBUGPLANE_PERSISTENCE_ACTION_OUTBOX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace debugplane::persistence {

// A claim held on one action.
struct ActionClaim {
  std::string action_id;
  std::string job_name;
  std::string claimer;
  int64_t claim_token = 0;  // Incremented by every claim of the row.
};

// What Claim found.
enum class ClaimOutcome {
  kClaimed,         // The caller holds the claim (`claim` is set).
  kClaimedByOther,  // Another claimer holds a live claim, or is claiming it now.
  kDone,            // Already carried out.
};

struct ClaimResult {
  ClaimOutcome outcome = ClaimOutcome::kClaimedByOther;
  ActionClaim claim;
};

// Thread-safe implementations; errors name the database and the action.
class ActionOutbox {
 public:
  virtual ~ActionOutbox() = default;

  // Adds action `action_id` of job `job_name`, unclaimed; an existing row is
  // left as it is.
  virtual absl::Status Enqueue(const std::string& action_id, const std::string& job_name) = 0;

  // Claims action `action_id` (added first if missing) for `claimer` until
  // now + `claim_for`, if it is not done and unclaimed, its claim expired, or
  // `claimer` holds it already (renewed).
  virtual absl::StatusOr<ClaimResult> Claim(const std::string& action_id,
                                            const std::string& job_name, const std::string& claimer,
                                            absl::Duration claim_for) = 0;

  // Claims up to `limit` actions that are not done and unclaimed (or whose
  // claim expired), in ActionId order, skipping rows other claimers are
  // claiming at this moment.
  virtual absl::StatusOr<std::vector<ActionClaim>> ClaimDue(const std::string& claimer, int limit,
                                                            absl::Duration claim_for) = 0;

  // Marks the claimed action done. FAILED_PRECONDITION naming the action if
  // the claim is no longer the caller's (it expired and another claimed it).
  virtual absl::Status Complete(const ActionClaim& claim) = 0;
};

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_ACTION_OUTBOX_H_
