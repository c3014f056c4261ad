#include "core/jobs/rule_validation.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/jobs/rule_actions.h"
#include "core/jobs/rule_catalog.h"

namespace debugplane::core::validation_internal {
namespace {

absl::string_view KindWord(RuleKind kind) {
  return kind == RuleKind::kDebug ? "debugging" : "profiler";
}

absl::string_view ListOf(RuleKind kind) {
  return kind == RuleKind::kDebug ? "DebugRuleConfigurations" : "ProfilerRuleConfigurations";
}

// Levenshtein distance, case-insensitive. Both strings are short (callers
// bound them) so the quadratic cost does not matter.
size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const bool same = absl::ascii_tolower(static_cast<unsigned char>(a[i - 1])) ==
                        absl::ascii_tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Why `name` is not a built-in rule, with the names it may have meant.
std::string UnknownRuleDescription(absl::string_view name, RuleKind kind) {
  std::vector<std::string> close;
  // Only short names get suggestions: a megabyte of junk is just unknown.
  if (name.size() <= kMaxQuoted) {
    const std::string lower = absl::AsciiStrToLower(name);
    for (const BuiltinRuleInfo& rule : BuiltinRules()) {
      const std::string rule_lower = absl::AsciiStrToLower(rule.name);
      const bool is_close = rule_lower == lower ||
                            EditDistance(name, rule.name) <= std::max<size_t>(2, name.size() / 5) ||
                            (lower.size() >= 4 && rule_lower.find(lower) != std::string::npos);
      if (!is_close) continue;
      close.push_back(rule.kind == kind ? absl::StrCat("'", rule.name, "'")
                                        : absl::StrCat("'", rule.name, "' (a ", KindWord(rule.kind),
                                                       " rule, for ", ListOf(rule.kind), ")"));
    }
  }
  std::string description =
      absl::StrCat(Quote(name), " is not a built-in ", KindWord(kind), " rule");
  if (!close.empty()) {
    absl::StrAppend(&description, "; did you mean ", absl::StrJoin(close, " or "), "?");
    return description;
  }
  std::vector<absl::string_view> names;
  for (const BuiltinRuleInfo& rule : BuiltinRules()) {
    if (rule.kind == kind) names.push_back(rule.name);
  }
  absl::StrAppend(&description, "; the built-in ", KindWord(kind),
                  " rules are: ", absl::StrJoin(names, ", "));
  return description;
}

// SimilarAcrossRuns' other_trials: another training job's name, or a trial
// path confined to the data roots like any output path. Checked here, at
// Create, rather than found wrong when the rule starts.
void CheckOtherTrials(Violations& v, const std::string& field, absl::string_view value,
                      const ValidationOptions& options) {
  if (absl::StartsWith(value, "/") || absl::StrContains(value, "://")) {
    CheckOutputPath(v, field, value, /*required=*/true, options);
    return;
  }
  Violations as_name;
  CheckTrainingJobName(as_name, field, value);
  if (!as_name.ToStatus().ok()) {
    v.Add(field, absl::StrCat(Quote(value),
                              " is neither a training job name nor an absolute trial path "
                              "(/path, file:///path or s3://bucket/prefix)"));
  }
}

// RuleParameters.action_json: debugging rules only, and a valid action list.
void CheckRuleActions(Violations& v, const std::string& params_field, const StringMap& parameters,
                      RuleKind kind, bool values_fit) {
  auto actions = parameters.find(std::string(kActionJsonParameter));
  if (actions == parameters.end()) return;
  const std::string actions_field = EntryField(params_field, kActionJsonParameter);
  if (kind == RuleKind::kProfiler) {
    v.Add(actions_field,
          "profiler rules take no actions (as in SageMaker Debugger); put the action on a "
          "debugging rule or watch the job with WatchTrainingJob");
  } else if (values_fit) {
    absl::StatusOr<std::vector<RuleActionSpec>> parsed = ParseActionJson(actions->second);
    if (!parsed.ok()) v.Add(actions_field, std::string(parsed.status().message()));
  }
}

// A built-in rules image's rule_to_invoke: present, a built-in rule of
// `kind`, and (through options.check_rule_parameters) its parameters.
void CheckBuiltinRuleToInvoke(Violations& v, const std::string& params_field,
                              const StringMap& parameters, RuleKind kind, bool values_fit,
                              const ValidationOptions& options) {
  const std::string invoke_field = EntryField(params_field, "rule_to_invoke");
  auto it = parameters.find("rule_to_invoke");
  if (it == parameters.end() || it->second.empty()) {
    v.Add(invoke_field,
          absl::StrCat("is required with a built-in rules image: the name of the built-in ",
                       KindWord(kind), " rule to run, e.g. '",
                       kind == RuleKind::kDebug ? "LossNotDecreasing" : "ProfilerReport", "'"));
    return;
  }
  const BuiltinRuleInfo* builtin = FindBuiltinRule(it->second);
  if (builtin == nullptr) {
    v.Add(invoke_field, UnknownRuleDescription(it->second, kind));
  } else if (builtin->kind != kind) {
    v.Add(invoke_field, absl::StrCat("'", builtin->name, "' is a built-in ",
                                     KindWord(builtin->kind), " rule; configure it in ",
                                     ListOf(builtin->kind), ", not in ", ListOf(kind)));
  } else if (options.check_rule_parameters && values_fit) {
    const RuleParameterMap checked_parameters(parameters.begin(), parameters.end());
    absl::Status checked = options.check_rule_parameters(it->second, checked_parameters);
    if (!checked.ok()) v.Add(params_field, std::string(checked.message()));
  }
}

// RuleEvaluatorImage: required; a built-in rules image (then rule_to_invoke
// is checked) or a custom evaluator the server allows.
void CheckRuleEvaluator(Violations& v, const std::string& field, const std::string& image,
                        const StringMap& parameters, RuleKind kind, bool values_fit,
                        const ValidationOptions& options) {
  const std::string image_field = field + ".RuleEvaluatorImage";
  if (image.empty()) {
    v.Add(image_field,
          "is required: a SageMaker Debugger rules image "
          "(<account>.dkr.ecr.<region>.amazonaws.com/sagemaker-debugger-rules:latest) or "
          "'builtin' to run the built-in rule named by RuleParameters.rule_to_invoke, or a "
          "custom evaluator the server allows");
    return;
  }
  if (!CheckLength(v, image_field, image, 1, 255)) return;
  if (IsBuiltinRuleEvaluatorImage(image)) {
    CheckBuiltinRuleToInvoke(v, field + ".RuleParameters", parameters, kind, values_fit, options);
    return;
  }
  const auto& allowed = options.allowed_custom_evaluators;
  if (std::find(allowed.begin(), allowed.end(), image) == allowed.end()) {
    v.Add(image_field,
          absl::StrCat(Quote(image),
                       " is not a built-in rules image and the server does not allow it as a "
                       "custom rule evaluator; use 'builtin' or a sagemaker-debugger-rules "
                       "image for a built-in rule, or have the server started with "
                       "--allow-evaluator ",
                       Quote(image)));
  }
}

// One DebugRuleConfiguration or ProfilerRuleConfiguration (same members).
template <typename Rule>
void CheckRule(Violations& v, const std::string& field, const Rule& rule, RuleKind kind,
               const ValidationOptions& options) {
  CheckLength(v, field + ".RuleConfigurationName", rule.rule_configuration_name(), 1, 256);
  CheckNameCharacters(v, field + ".RuleConfigurationName", rule.rule_configuration_name());
  CheckDirectoryPath(v, field + ".LocalPath", rule.local_path());
  CheckOutputPath(v, field + ".S3OutputPath", rule.s3_output_path(), /*required=*/false, options);
  if (!rule.instance_type().empty()) {
    CheckString(v, field + ".InstanceType", rule.instance_type(), 1, 64, "InstanceType",
                "ml.<family>.<size>, e.g. ml.m5.xlarge");
  }
  if (rule.volume_size_in_gb() < 0) {
    v.Add(field + ".VolumeSizeInGB",
          absl::StrCat(rule.volume_size_in_gb(), " is negative; use 0 or more"));
  }
  const std::string params_field = field + ".RuleParameters";
  // Over-long values are refused here and never parsed (JSON, regexes).
  const bool values_fit =
      CheckMap(v, params_field, rule.rule_parameters(),
               {.max_entries = 100, .key_min = 1, .key_max = 256, .value_max = 256});
  if (auto other = rule.rule_parameters().find("other_trials");
      other != rule.rule_parameters().end() && values_fit) {
    CheckOtherTrials(v, EntryField(params_field, "other_trials"), other->second, options);
  }
  CheckRuleActions(v, params_field, rule.rule_parameters(), kind, values_fit);
  CheckRuleEvaluator(v, field, rule.rule_evaluator_image(), rule.rule_parameters(), kind,
                     values_fit, options);
}

// CheckRuleList for either list, whose configurations have the same members.
template <typename Rule>
NameIndex CheckRules(Violations& v, const google::protobuf::RepeatedPtrField<Rule>& rules,
                     RuleKind kind, const ValidationOptions& options, const NameIndex* other_list) {
  const std::string list_field(ListOf(kind));
  CheckListSize(v, list_field, rules.size(), kMaxRulesPerKind, "rule configurations");
  NameIndex names;
  for (int i = 0; i < rules.size(); ++i) {
    const std::string field = Indexed(list_field, i);
    CheckRule(v, field, rules[i], kind, options);
    const std::string& name = rules[i].rule_configuration_name();
    if (name.empty()) continue;
    auto [it, inserted] = names.try_emplace(name, i);
    if (!inserted) {
      v.Add(field + ".RuleConfigurationName",
            absl::StrCat(Quote(name), " is already the name of ", Indexed(list_field, it->second),
                         "; rule configuration names must be unique"));
      continue;
    }
    if (other_list == nullptr) continue;
    if (auto other = other_list->find(name); other != other_list->end()) {
      const RuleKind other_kind = kind == RuleKind::kDebug ? RuleKind::kProfiler : RuleKind::kDebug;
      v.Add(field + ".RuleConfigurationName",
            absl::StrCat(Quote(name), " is already the name of ",
                         Indexed(ListOf(other_kind), other->second),
                         "; rule configuration names must be unique across "
                         "DebugRuleConfigurations and ProfilerRuleConfigurations"));
    }
  }
  return names;
}

}  // namespace

NameIndex CheckRuleList(Violations& v,
                        const google::protobuf::RepeatedPtrField<v1::DebugRuleConfiguration>& rules,
                        const ValidationOptions& options, const NameIndex* other_list) {
  return CheckRules(v, rules, RuleKind::kDebug, options, other_list);
}

NameIndex CheckRuleList(
    Violations& v, const google::protobuf::RepeatedPtrField<v1::ProfilerRuleConfiguration>& rules,
    const ValidationOptions& options, const NameIndex* other_list) {
  return CheckRules(v, rules, RuleKind::kProfiler, options, other_list);
}

}  // namespace debugplane::core::validation_internal
