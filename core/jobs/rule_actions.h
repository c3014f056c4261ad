// Rule actions: what a rule's RuleParameters["action_json"] asks for when the
// rule finds issues (SageMaker Debugger's built-in actions), and how they are
// recorded on the job.
//
// The format is smdebug's: one object or a list of objects, each with a
// "name" of "stoptraining" (optional "training_job_prefix"), "email" or
// "sms" (required "endpoint"), e.g.
//   [{"name": "stoptraining", "training_job_prefix": "my-job"},
//    {"name": "email", "endpoint": "ml-team@example.com"}]
//
// Actions are recorded in the job record (RuleAction, status Pending) by the
// same write that records the rule's IssuesFound, so a rule that found issues
// has its actions durable with it, and a restart finds exactly the actions
// that still have to be carried out. Pure functions: no I/O, no locking.

#ifndef DEBUGPLANE_CORE_JOBS_RULE_ACTIONS_H_
#define DEBUGPLANE_CORE_JOBS_RULE_ACTIONS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/jobs/job_record.h"

namespace debugplane::core {

// The RuleParameters key that holds a rule's actions.
inline constexpr absl::string_view kActionJsonParameter = "action_json";

enum class RuleActionType { kStopTraining, kEmail, kSms };

struct RuleActionSpec {
  RuleActionType type = RuleActionType::kStopTraining;
  // kStopTraining: the training job name prefix; empty means "this job".
  // kEmail: the address; kSms: the phone number (+ and 8 to 15 digits).
  std::string target;
};

// "StopTraining", "Email" or "SMS": how RuleAction.Action names the type.
absl::string_view RuleActionTypeName(RuleActionType type);

// Parses an action_json value.
// Returns INVALID_ARGUMENT saying what is wrong (longer than 256 characters
// or nested deeper than 16 levels, checked before parsing: see
// core/jobs/json_bounds.h; not JSON, an unknown action name, a missing or
// malformed endpoint, an unknown key, more than 10 actions) and, for lists,
// which entry ("action 2: ...").
absl::StatusOr<std::vector<RuleActionSpec>> ParseActionJson(absl::string_view json);

// Appends one Pending RuleAction per action of rule `rule`'s action_json
// (debug rules only; profiler rules take no actions, as in SageMaker).
// Called when the rule turns IssuesFound. Does nothing if the rule has no
// action_json or its actions are already recorded. Returns how many were
// added.
// REQUIRES: the rule's action_json passed ParseActionJson (validated at
// CreateTrainingJob); an unparsable one adds a single Failed action saying so.
int RecordTriggeredActions(JobRecord& job, absl::string_view rule, absl::Time now);

// Updates the action with `action_id`: status, details (at most 1024
// characters kept), attempts. Returns false if there is no such action, it
// is no longer Pending, or nothing changes.
bool SetRuleActionStatus(JobRecord& job, absl::string_view action_id,
                         v1::RuleActionStatus::Value status, absl::string_view details,
                         int attempts, absl::Time now);

// True while some action of the job is Pending.
bool HasPendingActions(const JobRecord& job);

absl::string_view RuleActionStatusName(v1::RuleActionStatus::Value status);

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_JOBS_RULE_ACTIONS_H_
