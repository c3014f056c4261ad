// The built-in rules of SageMaker Debugger, by name, and how a rule
// configuration selects one: the only home of the facts about them that
// the server and the rules engine share (each rule's name, whether it is a
// debugging or a profiler rule, and what it checks and suggests).
//
// Core keeps the catalog because it is pure domain: request validation
// (validation.h) needs it, and core must not depend on the rules engine.
// The rules engine consumes it (rules_engine/catalog/builtin_rules.h maps
// the catalog's debugging rules to their implementations, and refuses a name
// the catalog does not know); its tests check that every implemented rule is
// in the catalog with its kind.

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
  // Debugging rules only: why TensorBoard event files (scalars and
  // histograms by tag, rules_engine/tensorboard/) cannot carry what the rule
  // reads, e.g. "it reads the labels and predictions tensors"; empty when
  // they can (the rule evaluates a TensorBoard trial). The one answer that
  // CreateTrainingJob's Warnings and the scheduler's Errors share.
  absl::string_view tensorboard_gap = {};
};

// Every built-in rule of the Debugger developer guide's list, in its order.
// The texts live as long as the process. Thread-safe.
std::span<const BuiltinRuleInfo> BuiltinRules();

// The rule named `name` (exact, case-sensitive), or nullptr.
const BuiltinRuleInfo* FindBuiltinRule(absl::string_view name);

// BuiltinRuleInfo::tensorboard_gap of the debugging rule `name`; empty for
// a rule TensorBoard logs can feed, a profiler rule or an unknown name.
absl::string_view TensorBoardGap(absl::string_view name);

// True if a RuleEvaluatorImage selects the built-in rules: the word
// "builtin", or a SageMaker Debugger rules image URI
// ("<account>.dkr.ecr.<region>.amazonaws.com/sagemaker-debugger-rules:<tag>"),
// so SageMaker JSON works unchanged.
bool IsBuiltinRuleEvaluatorImage(absl::string_view image);

}  // namespace debugplane::core

#endif  // DEBUGPLANE_CORE_JOBS_RULE_CATALOG_H_
