// A built-in rule: evaluated step by step as data arrives.

#ifndef DEBUGPLANE_RULES_ENGINE_RULE_H_
#define DEBUGPLANE_RULES_ENGINE_RULE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rules_engine/step.h"

namespace debugplane::rules_engine {

using RuleParameters = std::map<std::string, std::string>;

// What a rule concluded after a step or at the end of training.
struct RuleVerdict {
  enum class Kind {
    kContinue,       // No conclusion yet: keep feeding steps.
    kIssuesFound,    // The condition was met (terminal).
    kNoIssuesFound,  // Only from OnTrainingEnd: all data evaluated, no issue.
    kError,          // The rule cannot evaluate (e.g. no usable data).
  };
  Kind kind = Kind::kContinue;
  // For kIssuesFound: which step, mode and tensor and the value that crossed
  // which threshold, e.g. "step 12 (TRAIN step 10): gradient/fc1.weight mean
  // |x| 1.5e-39 < threshold 1e-07". For kError: the cause. At most 1024 chars.
  std::string details;

  static RuleVerdict Continue() { return {}; }
  static RuleVerdict Issues(std::string details) { return {Kind::kIssuesFound, std::move(details)}; }
  static RuleVerdict NoIssues(std::string details = "") {
    return {Kind::kNoIssuesFound, std::move(details)};
  }
  static RuleVerdict Error(std::string details) { return {Kind::kError, std::move(details)}; }
};

// A rule instance for one trial. Not thread-safe; deterministic: the same
// steps give the same verdicts (evaluation resumes after a restart by
// replaying steps).
class Rule {
 public:
  virtual ~Rule() = default;
  // The rule's name, e.g. "VanishingGradient".
  virtual std::string name() const = 0;
  // Whether the rule needs `tensor` from each step (only those are decoded).
  virtual bool Wants(const std::string& tensor, const TrialInfo& info) const = 0;
  // Collections the hook must save for this rule to have data, e.g.
  // {"gradients"}; used to warn at CreateTrainingJob time.
  virtual std::vector<std::string> RequiredCollections() const = 0;
  // Evaluates one step (only the wanted tensors are in it). Steps come in
  // ascending global step order.
  virtual RuleVerdict OnStep(const Step& step, const TrialInfo& info) = 0;
  // Training ended and every step was evaluated: NoIssuesFound, IssuesFound
  // (for rules that judge the whole run) or Error (no usable data; details
  // say what was needed).
  virtual RuleVerdict OnTrainingEnd(const TrialInfo& info) = 0;
};

// Creates the built-in rule `rule_name` (rule_to_invoke) with `parameters`
// (all strings, documented defaults for the missing ones; "rule_to_invoke"
// and "action_json" are ignored here).
// Returns INVALID_ARGUMENT naming the parameter and what is allowed for a bad
// value or an unknown parameter, NOT_FOUND for an unknown rule,
// UNIMPLEMENTED for a rule that is not a tensor rule.
absl::StatusOr<std::unique_ptr<Rule>> CreateBuiltinRule(const std::string& rule_name,
                                                        const RuleParameters& parameters);

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_RULE_H_
