#include "core/rule_catalog.h"

#include <array>

#include "absl/strings/match.h"

namespace debugplane::core {
namespace {

constexpr std::array<BuiltinRuleInfo, 32> kBuiltinRules = {{
    // Profiler rules (debugger-built-in-rules.md, "Debugger ProfilerRule").
    {"ProfilerReport", RuleKind::kProfiler},
    {"BatchSize", RuleKind::kProfiler},
    {"CPUBottleneck", RuleKind::kProfiler},
    {"GPUMemoryIncrease", RuleKind::kProfiler},
    {"IOBottleneck", RuleKind::kProfiler},
    {"LoadBalancing", RuleKind::kProfiler},
    {"LowGPUUtilization", RuleKind::kProfiler},
    {"OverallSystemUsage", RuleKind::kProfiler},
    {"MaxInitializationTime", RuleKind::kProfiler},
    {"OverallFrameworkMetrics", RuleKind::kProfiler},
    {"StepOutlier", RuleKind::kProfiler},
    // Debugging rules (debugger-built-in-rules.md, "Debugger Rule").
    {"CreateXgboostReport", RuleKind::kDebug},
    {"DeadRelu", RuleKind::kDebug},
    {"ExplodingTensor", RuleKind::kDebug},
    {"PoorWeightInitialization", RuleKind::kDebug},
    {"SaturatedActivation", RuleKind::kDebug},
    {"VanishingGradient", RuleKind::kDebug},
    {"WeightUpdateRatio", RuleKind::kDebug},
    {"AllZero", RuleKind::kDebug},
    {"ClassImbalance", RuleKind::kDebug},
    {"LossNotDecreasing", RuleKind::kDebug},
    {"Overfit", RuleKind::kDebug},
    {"Overtraining", RuleKind::kDebug},
    {"SimilarAcrossRuns", RuleKind::kDebug},
    {"StalledTrainingRule", RuleKind::kDebug},
    {"TensorVariance", RuleKind::kDebug},
    {"UnchangedTensor", RuleKind::kDebug},
    {"CheckInputImages", RuleKind::kDebug},
    {"NLPSequenceRatio", RuleKind::kDebug},
    {"Confusion", RuleKind::kDebug},
    {"FeatureImportanceOverweight", RuleKind::kDebug},
    {"TreeDepth", RuleKind::kDebug},
}};

}  // namespace

std::span<const BuiltinRuleInfo> BuiltinRules() { return kBuiltinRules; }

const BuiltinRuleInfo* FindBuiltinRule(absl::string_view name) {
  for (const BuiltinRuleInfo& rule : kBuiltinRules) {
    if (rule.name == name) return &rule;
  }
  return nullptr;
}

bool IsBuiltinRuleEvaluatorImage(absl::string_view image) {
  if (image == "builtin") return true;
  // "<registry>/sagemaker-debugger-rules:<tag>" (or without a tag).
  const size_t slash = image.rfind('/');
  if (slash == absl::string_view::npos) return false;
  absl::string_view repo = image.substr(slash + 1);
  const size_t colon = repo.find(':');
  if (colon != absl::string_view::npos) repo = repo.substr(0, colon);
  return repo == "sagemaker-debugger-rules";
}

}  // namespace debugplane::core
