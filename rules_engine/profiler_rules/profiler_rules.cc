// CreateProfilerRule: the built-in profiler rules by name. The rules live
// by family: rules_gpu.cc (LowGPUUtilization, GPUMemoryIncrease,
// LoadBalancing), rules_bottleneck.cc (CPUBottleneck, IOBottleneck),
// rules_system_usage.cc (OverallSystemUsage, BatchSize), framework_rules.cc
// (the rules over framework events).

#include "rules_engine/profiler_rules/profiler_rules.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rules_engine/profiler_rules/framework_rules.h"
#include "rules_engine/profiler_rules/system_rule.h"

namespace debugplane::rules_engine {
namespace {

using profiler_rules_internal::ProfilerRuleFactories;

// The rules over system metrics, by name.
const ProfilerRuleFactories& SystemRules() {
  static const ProfilerRuleFactories* const rules = [] {
    auto* factories = new ProfilerRuleFactories;
    profiler_rules_internal::AddGpuRules(factories);
    profiler_rules_internal::AddBottleneckRules(factories);
    profiler_rules_internal::AddSystemUsageRules(factories);
    return factories;
  }();
  return *rules;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ProfilerRule>> CreateProfilerRule(const std::string& name,
                                                                 const RuleParameters& parameters) {
  if (auto it = SystemRules().find(name); it != SystemRules().end()) {
    return it->second(name, parameters);
  }
  for (const std::string& framework_rule : FrameworkProfilerRuleNames()) {
    if (name == framework_rule) return CreateFrameworkProfilerRule(name, parameters);
  }
  return absl::NotFoundError(absl::StrCat("unknown profiler rule '", name,
                                          "'; known: ", absl::StrJoin(ProfilerRuleNames(), ", ")));
}

std::vector<std::string> ProfilerRuleNames() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : SystemRules()) names.push_back(name);
  for (std::string& name : FrameworkProfilerRuleNames()) names.push_back(std::move(name));
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace debugplane::rules_engine
