// The dashboard's insights: for each debug and profiler rule of a job, its
// status, what it checks and what to do about it (the rule catalog's prose,
// core/jobs/rule_catalog.h), the parameters it runs with (defaults merged) and
// what it found, read from its StatusDetails.

#ifndef DEBUGPLANE_RULES_ENGINE_INSIGHTS_RULE_INSIGHTS_H_
#define DEBUGPLANE_RULES_ENGINE_INSIGHTS_RULE_INSIGHTS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/jobs/job_record.h"

namespace debugplane::rules_engine::insights {

// What a rule's StatusDetails say it found. Built-in rules write
// "step N (MODE step M): TENSOR ... VALUE ..." (tensor rules) or prose
// naming "step N" (profiler rules); whatever is not there stays empty.
struct RuleFinding {
  std::optional<int64_t> step;
  std::string tensor;  // Empty: none named.
  std::optional<double> value;
  std::string message;  // The whole details.
};

// Parses `details` as above. Never fails: unknown shapes give only the
// message. Pure; any input is safe (fuzz/rule_details_fuzzer.cc).
RuleFinding ParseRuleDetails(absl::string_view details);

struct RuleInsight {
  std::string rule;    // The rule configuration name.
  std::string kind;    // "debug" | "profiler".
  std::string status;  // "InProgress", "IssuesFound", ...
  std::string checks;
  std::string suggestion;
  // Effective parameters; for a rule whose parameters the catalog refuses,
  // the given ones (the rule is then in Error and says why).
  std::map<std::string, std::string> parameters;
  std::optional<RuleFinding> found;  // For IssuesFound and Error only.
  // The rule writes a report (built-in ProfilerReport, CreateXgboostReport),
  // served by GetProfilerReport and the dashboard's /api/jobs/NAME/report.
  bool report = false;
};

// Every rule of `job`, debug rules first, in configuration order. A custom
// rule (not a built-in evaluator image) says so in `checks`. Pure.
std::vector<RuleInsight> RuleInsightsOf(const core::JobRecord& job);

}  // namespace debugplane::rules_engine::insights

#endif  // DEBUGPLANE_RULES_ENGINE_INSIGHTS_RULE_INSIGHTS_H_
