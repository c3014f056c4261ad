#include "rules_engine/insights/rule_insights.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/jobs/rule_catalog.h"
#include "rules_engine/catalog/builtin_rules.h"

namespace debugplane::rules_engine::insights {

namespace {

// The digits at the start of `s` as a step (at most 18, so no overflow).
std::optional<int64_t> LeadingInteger(absl::string_view s) {
  size_t n = 0;
  while (n < s.size() && n < 18 && absl::ascii_isdigit(s[n])) ++n;
  int64_t v = 0;
  if (n == 0 || !absl::SimpleAtoi(s.substr(0, n), &v)) return std::nullopt;
  return v;
}

bool IsNumberChar(char c) {
  return absl::ascii_isdigit(c) || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E';
}

// The first word of `s` that parses as a finite number (after the tensor).
std::optional<double> FirstNumber(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ') ++i;
    size_t j = i;
    while (j < s.size() && s[j] != ' ' && s[j] != ',' && s[j] != ';') ++j;
    absl::string_view word = s.substr(i, j - i);
    while (!word.empty() && !IsNumberChar(word.back())) word.remove_suffix(1);
    double v = 0;
    if (!word.empty() && (absl::ascii_isdigit(word[0]) || word[0] == '-') &&
        absl::SimpleAtod(word, &v) && std::isfinite(v)) {
      return v;
    }
    i = j + 1;
  }
  return std::nullopt;
}

template <typename Configuration>
std::map<std::string, std::string> ParametersOf(const Configuration& config, bool builtin,
                                                std::string* rule_to_invoke) {
  std::map<std::string, std::string> given(config.rule_parameters().begin(),
                                           config.rule_parameters().end());
  auto it = given.find("rule_to_invoke");
  *rule_to_invoke = it == given.end() ? "" : it->second;
  if (!builtin || rule_to_invoke->empty()) return given;
  absl::StatusOr<std::map<std::string, std::string>> effective =
      EffectiveRuleParameters(*rule_to_invoke, given);
  if (!effective.ok()) return given;
  return *effective;
}

template <typename Configuration, typename Status>
RuleInsight InsightOf(const Configuration& config, const Status* status, absl::string_view kind) {
  RuleInsight r;
  r.rule = config.rule_configuration_name();
  r.kind = std::string(kind);
  const bool builtin = core::IsBuiltinRuleEvaluatorImage(config.rule_evaluator_image());
  std::string rule_to_invoke;
  r.parameters = ParametersOf(config, builtin, &rule_to_invoke);
  r.parameters.erase("rule_to_invoke");
  if (!builtin) {
    r.checks = absl::StrCat("A custom rule, evaluated by '", config.rule_evaluator_image(), "'.");
  } else if (const core::BuiltinRuleInfo* info = core::FindBuiltinRule(rule_to_invoke)) {
    r.checks = std::string(info->checks);
    r.report = rule_to_invoke == "ProfilerReport" || rule_to_invoke == "CreateXgboostReport";
    r.suggestion = std::string(info->suggestion);
  } else {
    r.checks = absl::StrCat("Built-in rule '", rule_to_invoke, "' is not in the catalog.");
  }
  if (status == nullptr) {
    r.status = "InProgress";
    return r;
  }
  r.status = std::string(core::RuleStatusName(status->rule_evaluation_status()));
  if (status->rule_evaluation_status() == v1::RuleEvaluationStatus::IssuesFound ||
      status->rule_evaluation_status() == v1::RuleEvaluationStatus::Error) {
    r.found = ParseRuleDetails(status->status_details());
  }
  return r;
}

template <typename Statuses>
auto FindStatus(const Statuses& statuses, const std::string& name) -> decltype(&*statuses.begin()) {
  for (const auto& s : statuses) {
    if (s.rule_configuration_name() == name) return &s;
  }
  return nullptr;
}

}  // namespace

RuleFinding ParseRuleDetails(absl::string_view details) {
  RuleFinding f;
  f.message = std::string(details);
  // "step N" anywhere (the first).
  for (size_t at = details.find("step "); at != absl::string_view::npos;
       at = details.find("step ", at + 1)) {
    if (at > 0 && absl::ascii_isalpha(details[at - 1])) continue;
    if (std::optional<int64_t> step = LeadingInteger(details.substr(at + 5))) {
      f.step = step;
      break;
    }
  }
  // Tensor rules: "step N (MODE step M): TENSOR rest".
  if (absl::StartsWith(details, "step ")) {
    const size_t colon = details.find("): ");
    if (colon != absl::string_view::npos) {
      absl::string_view rest = details.substr(colon + 3);
      const size_t space = rest.find(' ');
      f.tensor = std::string(rest.substr(0, space));
      if (space != absl::string_view::npos) f.value = FirstNumber(rest.substr(space + 1));
    }
  }
  return f;
}

std::vector<RuleInsight> RuleInsightsOf(const core::JobRecord& job) {
  std::vector<RuleInsight> out;
  for (const auto& config : job.debug_rule_configurations()) {
    out.push_back(InsightOf(
        config, FindStatus(job.debug_rule_evaluation_statuses(), config.rule_configuration_name()),
        "debug"));
  }
  for (const auto& config : job.profiler_rule_configurations()) {
    out.push_back(InsightOf(
        config,
        FindStatus(job.profiler_rule_evaluation_statuses(), config.rule_configuration_name()),
        "profiler"));
  }
  return out;
}

}  // namespace debugplane::rules_engine::insights
