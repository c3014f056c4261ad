// Validation of rule configurations (DebugRuleConfigurations,
// ProfilerRuleConfigurations): names, paths, RuleParameters, the action
// list, and the rule evaluator: a built-in rule of the right kind
// (rule_catalog.h, with suggestions for a misspelt name) or a custom
// evaluator the server allows. Internal to core/jobs (validation.h is the
// API). Thread-safe: pure functions.

#ifndef DEBUGPLANE_CORE_JOBS_RULE_VALIDATION_H_
#define DEBUGPLANE_CORE_JOBS_RULE_VALIDATION_H_

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "core/jobs/validation.h"
#include "core/jobs/validation_checks.h"
#include "debugplane/v1/training_job.pb.h"
#include "google/protobuf/repeated_ptr_field.h"

namespace debugplane::core::validation_internal {

// Rule configuration names seen in one list -> their index, to report a
// duplicate against its first use.
using NameIndex = absl::flat_hash_map<absl::string_view, int>;

// Every rule of one list: at most kMaxRulesPerKind, each configuration's
// members, names unique within the list and not used by `other_list` (the
// debugging list's names when checking the profiler list; may be null).
// Returns the list's names (views into `rules`).
NameIndex CheckRuleList(Violations& v,
                        const google::protobuf::RepeatedPtrField<v1::DebugRuleConfiguration>& rules,
                        const ValidationOptions& options, const NameIndex* other_list);
NameIndex CheckRuleList(
    Violations& v, const google::protobuf::RepeatedPtrField<v1::ProfilerRuleConfiguration>& rules,
    const ValidationOptions& options, const NameIndex* other_list);

}  // namespace debugplane::core::validation_internal

#endif  // DEBUGPLANE_CORE_JOBS_RULE_VALIDATION_H_
