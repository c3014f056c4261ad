// The catalog of built-in rules: every rule SageMaker Debugger documents,
// created and checked by name. It sits above the rule families
// (tensor_rules/, profiler_rules/) so that callers need not know which
// family implements a rule. Which rules exist, and whether each is a
// debugging or a profiler rule, is core/jobs/rule_catalog.h's alone (the one
// table the server's validation reads too); this library only maps those
// names to implementations.

#ifndef DEBUGPLANE_RULES_ENGINE_CATALOG_BUILTIN_RULES_H_
#define DEBUGPLANE_RULES_ENGINE_CATALOG_BUILTIN_RULES_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rules_engine/rule/rule.h"

namespace debugplane::rules_engine {

// Creates the built-in rule `rule_name` (rule_to_invoke) with `parameters`
// (all strings, documented defaults for the missing ones; "rule_to_invoke"
// and "action_json" are ignored here).
// Returns INVALID_ARGUMENT naming the parameter and what is allowed for a bad
// value or an unknown parameter, NOT_FOUND for a name that is not in
// core::BuiltinRules(), UNIMPLEMENTED for a catalog rule that is not a tensor
// rule (a profiler rule) or that has no implementation here. The debugging
// rule CreateXgboostReport is made here too (rules_engine/xgboost_report/).
absl::StatusOr<std::unique_ptr<Rule>> CreateBuiltinRule(const std::string& rule_name,
                                                        const RuleParameters& parameters);
absl::StatusOr<std::unique_ptr<Rule>> CreateBuiltinRule(const std::string& rule_name,
                                                        const RuleParameters& parameters,
                                                        const RuleContext& context);

// Checks `parameters` of built-in rule `rule_name` exactly as
// CreateBuiltinRule does (same errors) without needing a RuleContext, or for
// a profiler rule (and ProfilerReport's overrides) as CreateProfilerRuleSet
// does: for CreateTrainingJob- and UpdateTrainingJob-time validation.
absl::Status ValidateBuiltinRuleParameters(const std::string& rule_name,
                                           const RuleParameters& parameters);

// The parameters built-in rule `rule_name` runs with: every parameter it
// reads, the given value or its default, as text (what a report or the
// dashboard shows as "effective parameters"). For ProfilerReport, which runs
// every profiler rule, the keys are "<Rule>.<parameter>". Errors as
// ValidateBuiltinRuleParameters'.
absl::StatusOr<std::map<std::string, std::string>> EffectiveRuleParameters(
    const std::string& rule_name, const RuleParameters& parameters);

// The names of the built-in tensor rules CreateBuiltinRule knows, sorted.
std::vector<std::string> BuiltinTensorRuleNames();

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_CATALOG_BUILTIN_RULES_H_
