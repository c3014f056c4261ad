// The catalog of built-in rules: creation and parameter checks by name. The
// rules themselves (names, kinds) are core/jobs/rule_catalog.h's; this file
// maps its debugging rules to their implementations.

#include "rules_engine/catalog/builtin_rules.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/jobs/rule_catalog.h"
#include "rules_engine/profiler_rules/profiler_report_rules.h"
#include "rules_engine/tensor_rules/rule_internal.h"
#include "rules_engine/xgboost_report/xgboost_report_rule.h"

namespace debugplane::rules_engine {

namespace {

const std::map<std::string, internal::RuleMaker>& Makers() {
  static const auto* makers = new std::map<std::string, internal::RuleMaker>{
      {"VanishingGradient", internal::MakeVanishingGradient},
      {"ExplodingTensor", internal::MakeExplodingTensor},
      {"WeightUpdateRatio", internal::MakeWeightUpdateRatio},
      {"PoorWeightInitialization", internal::MakePoorWeightInitialization},
      {"LossNotDecreasing", internal::MakeLossNotDecreasing},
      {"Overfit", internal::MakeOverfit},
      {"Overtraining", internal::MakeOvertraining},
      {"DeadRelu", internal::MakeDeadRelu},
      {"SaturatedActivation", internal::MakeSaturatedActivation},
      {"TensorVariance", internal::MakeTensorVariance},
      {"UnchangedTensor", internal::MakeUnchangedTensor},
      {"AllZero", internal::MakeAllZero},
      {"SimilarAcrossRuns", internal::MakeSimilarAcrossRuns},
      {"ClassImbalance", internal::MakeClassImbalance},
      {"CheckInputImages", internal::MakeCheckInputImages},
      {"NLPSequenceRatio", internal::MakeNLPSequenceRatio},
      {"Confusion", internal::MakeConfusion},
      {"FeatureImportanceOverweight", internal::MakeFeatureImportanceOverweight},
      {"TreeDepth", internal::MakeTreeDepth},
      {"StalledTrainingRule", internal::MakeStalledTrainingRule},
      {"CreateXgboostReport", MakeCreateXgboostReport},
  };
  return *makers;
}

// A stand-in lookup so that SimilarAcrossRuns builds (to check or show its
// parameters) without access to the other trial; such a rule is discarded.
RuleContext ValidationContext() {
  RuleContext context;
  context.other_trial = [](const std::string&, int64_t,
                           const std::string&) -> absl::StatusOr<Tensor> {
    return absl::NotFoundError("validation only");
  };
  return context;
}

// Why `rule_name`, which has no tensor-rule implementation here, cannot be
// created: the catalog's profiler rules are evaluated elsewhere, a
// debugging rule without an implementation would not be evaluated by this
// engine, and other names are not built-in rules.
absl::Status NotATensorRule(const std::string& rule_name) {
  const core::BuiltinRuleInfo* info = core::FindBuiltinRule(rule_name);
  if (info == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("unknown built-in rule '", rule_name,
                     "'; tensor rules: ", absl::StrJoin(BuiltinTensorRuleNames(), ", ")));
  }
  if (info->kind == core::RuleKind::kProfiler) {
    return absl::UnimplementedError(absl::StrCat(
        "built-in rule '", rule_name, "' is not a tensor rule and is not evaluated here"));
  }
  return absl::UnimplementedError(
      absl::StrCat("built-in debugging rule '", rule_name,
                   "' has no implementation in this rules engine and is not evaluated here"));
}

absl::StatusOr<std::unique_ptr<Rule>> Create(const std::string& rule_name,
                                             const RuleParameters& parameters,
                                             const RuleContext& context) {
  auto it = Makers().find(rule_name);
  if (it == Makers().end()) return NotATensorRule(rule_name);
  RuleParameterReader reader(rule_name, parameters);
  return it->second(reader, context);
}

}  // namespace

std::vector<std::string> BuiltinTensorRuleNames() {
  std::vector<std::string> names;
  for (const auto& [name, maker] : Makers()) names.push_back(name);
  return names;
}

absl::StatusOr<std::unique_ptr<Rule>> CreateBuiltinRule(const std::string& rule_name,
                                                        const RuleParameters& parameters) {
  return Create(rule_name, parameters, RuleContext());
}

absl::StatusOr<std::unique_ptr<Rule>> CreateBuiltinRule(const std::string& rule_name,
                                                        const RuleParameters& parameters,
                                                        const RuleContext& context) {
  return Create(rule_name, parameters, context);
}

absl::StatusOr<std::map<std::string, std::string>> EffectiveRuleParameters(
    const std::string& rule_name, const RuleParameters& parameters) {
  std::map<std::string, std::string> out;
  if (IsProfilerRuleName(rule_name)) {
    absl::StatusOr<std::vector<std::unique_ptr<ProfilerRule>>> rules =
        CreateProfilerRuleSet(rule_name, parameters);
    if (!rules.ok()) return rules.status();
    for (const auto& rule : *rules) {
      const ProfilerRuleFinding finding = rule->Finding();
      for (const auto& [name, value] : finding.parameters) {
        out[rules->size() == 1 ? name : absl::StrCat(finding.rule, ".", name)] = value;
      }
    }
    return out;
  }
  auto it = Makers().find(rule_name);
  if (it == Makers().end()) return Create(rule_name, parameters, RuleContext()).status();
  RuleParameterReader reader(rule_name, parameters);
  absl::StatusOr<std::unique_ptr<Rule>> rule = it->second(reader, ValidationContext());
  if (!rule.ok()) return rule.status();
  return reader.resolved();
}

absl::Status ValidateBuiltinRuleParameters(const std::string& rule_name,
                                           const RuleParameters& parameters) {
  if (IsProfilerRuleName(rule_name)) {
    return CreateProfilerRuleSet(rule_name, parameters).status();
  }
  return Create(rule_name, parameters, ValidationContext()).status();
}

}  // namespace debugplane::rules_engine
