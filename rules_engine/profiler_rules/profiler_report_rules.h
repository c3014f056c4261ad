// ProfilerReport: the built-in profiler rule that runs every other profiler
// rule and writes the profiling report. Its parameters are overrides of the
// rules it runs, named <RuleName>_<parameter> (e.g. CPUBottleneck_threshold,
// LowGPUUtilization_window), as in the SageMaker Python SDK's
// rule_configs.ProfilerReport(**overrides).

#ifndef DEBUGPLANE_RULES_ENGINE_PROFILER_RULES_PROFILER_REPORT_RULES_H_
#define DEBUGPLANE_RULES_ENGINE_PROFILER_RULES_PROFILER_REPORT_RULES_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rules_engine/profiler_rules/profiler_rules.h"

namespace debugplane::rules_engine {

inline constexpr char kProfilerReportRule[] = "ProfilerReport";

// Creates one instance of every profiler rule (ProfilerRuleNames(), sorted),
// each with its overrides from `parameters`. Reserved keys (rule_to_invoke,
// base_trial, ...) and ProfilerReport's own scan_interval_us are accepted.
// INVALID_ARGUMENT naming the key for a key that is not
// <known rule>_<parameter>, for an override the rule does not know, and for
// a bad value.
absl::StatusOr<std::vector<std::unique_ptr<ProfilerRule>>> CreateProfilerReportRules(
    const RuleParameters& parameters);

// The rules a profiler rule configuration runs: every rule for ProfilerReport,
// else the one named rule (CreateProfilerRule). Same errors as those.
absl::StatusOr<std::vector<std::unique_ptr<ProfilerRule>>> CreateProfilerRuleSet(
    const std::string& rule_to_invoke, const RuleParameters& parameters);

// Whether `name` is ProfilerReport or a rule CreateProfilerRule knows.
bool IsProfilerRuleName(const std::string& name);

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_PROFILER_RULES_PROFILER_REPORT_RULES_H_
