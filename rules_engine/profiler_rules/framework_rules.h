// The built-in profiler rules over framework timelines (FrameworkEvent):
// StepOutlier, MaxInitializationTime, OverallFrameworkMetrics. Created
// through CreateProfilerRule (profiler_rules.h), which dispatches here.

#ifndef DEBUGPLANE_RULES_ENGINE_PROFILER_RULES_FRAMEWORK_RULES_H_
#define DEBUGPLANE_RULES_ENGINE_PROFILER_RULES_FRAMEWORK_RULES_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rules_engine/profiler_rules/profiler_rules.h"

namespace debugplane::rules_engine {

// The names CreateFrameworkProfilerRule knows.
std::vector<std::string> FrameworkProfilerRuleNames();

// Like CreateProfilerRule, for the names above.
absl::StatusOr<std::unique_ptr<ProfilerRule>> CreateFrameworkProfilerRule(
    const std::string& name, const RuleParameters& parameters);

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_PROFILER_RULES_FRAMEWORK_RULES_H_
