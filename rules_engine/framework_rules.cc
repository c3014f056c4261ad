#include "rules_engine/framework_rules.h"

#include "absl/strings/str_cat.h"

namespace debugplane::rules_engine {

// Placeholder until the framework rules land (same session).
std::vector<std::string> FrameworkProfilerRuleNames() { return {}; }

absl::StatusOr<std::unique_ptr<ProfilerRule>> CreateFrameworkProfilerRule(
    const std::string& name, const RuleParameters&) {
  return absl::NotFoundError(absl::StrCat("unknown profiler rule '", name, "'"));
}

}  // namespace debugplane::rules_engine
