#include "rules_engine/profiler_rules/profiler_report_rules.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rules_engine/rule/rule_parameters.h"

namespace debugplane::rules_engine {

bool IsProfilerRuleName(const std::string& name) {
  if (name == kProfilerReportRule) return true;
  const std::vector<std::string> names = ProfilerRuleNames();
  return std::find(names.begin(), names.end(), name) != names.end();
}

absl::StatusOr<std::vector<std::unique_ptr<ProfilerRule>>> CreateProfilerReportRules(
    const RuleParameters& parameters) {
  const std::vector<std::string> names = ProfilerRuleNames();
  std::map<std::string, RuleParameters> overrides;
  for (const auto& [key, value] : parameters) {
    if (IsReservedRuleParameter(key) || key == "scan_interval_us") continue;
    // Rule names have no underscore, so the first one ends the rule's name.
    const size_t underscore = key.find('_');
    const std::string rule = key.substr(0, underscore);
    if (underscore == std::string::npos || underscore + 1 == key.size() ||
        std::find(names.begin(), names.end(), rule) == names.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(kProfilerReportRule, ": parameter '", key,
                       "' is not an override <RuleName>_<parameter> of a rule it runs (",
                       absl::StrJoin(names, ", "), "), e.g. CPUBottleneck_threshold"));
    }
    overrides[rule][key.substr(underscore + 1)] = value;
  }
  std::vector<std::unique_ptr<ProfilerRule>> rules;
  for (const std::string& name : names) {
    absl::StatusOr<std::unique_ptr<ProfilerRule>> rule = CreateProfilerRule(name, overrides[name]);
    if (!rule.ok()) {
      return absl::Status(rule.status().code(),
                          absl::StrCat(kProfilerReportRule, " override (", name,
                                       "_<parameter>): ", rule.status().message()));
    }
    rules.push_back(*std::move(rule));
  }
  return rules;
}

absl::StatusOr<std::vector<std::unique_ptr<ProfilerRule>>> CreateProfilerRuleSet(
    const std::string& rule_to_invoke, const RuleParameters& parameters) {
  if (rule_to_invoke == kProfilerReportRule) return CreateProfilerReportRules(parameters);
  absl::StatusOr<std::unique_ptr<ProfilerRule>> rule =
      CreateProfilerRule(rule_to_invoke, parameters);
  if (!rule.ok()) return rule.status();
  std::vector<std::unique_ptr<ProfilerRule>> rules;
  rules.push_back(*std::move(rule));
  return rules;
}

}  // namespace debugplane::rules_engine
