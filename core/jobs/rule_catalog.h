// The built-in rules of SageMaker Debugger, by name, and how a rule
// configuration selects one.

#ifndef DEBUGPLANE_CORE_JOBS_RULE_CATALOG_H_
#define DEBUGPLANE_CORE_JOBS_RULE_CATALOG_H_

#include <span>

#include "absl/strings/string_view.h"

namespace debugplane::core {

enum class RuleKind {
  kDebug,     // Evaluates tensors (DebugRuleConfigurations).
  kProfiler,  // Evaluates system and framework metrics (ProfilerRuleConfigurations).
};

struct BuiltinRuleInfo {
  absl::string_view name;  // As in RuleParameters["rule_to_invoke"].
  RuleKind kind;
  // What the rule checks, and what to do when it finds an issue: one or two
  // sentences each, for the dashboard's insights.
  absl::string_view checks;
  absl::string_view suggestion;
};

// Every built-in rule of the Debugger developer guide's list.
std::span<const BuiltinRuleInfo> BuiltinRules();

// The rule named `name` (exact, case-sensitive), or nullptr.
const BuiltinRuleInfo* FindBuiltinRule(absl::string_view name);

// True if a RuleEvaluatorImage selects the built-in rules: the word
// "builtin", or a SageMaker Debugger rules image URI
// ("<account>.dkr.ecr.<region>.amazonaws.com/sagemaker-debugger-rules:<tag>"),
// so SageMaker JSON works unchanged.
bool IsBuiltinRuleEvaluatorImage(absl::string_view image);

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_JOBS_RULE_CATALOG_H_
