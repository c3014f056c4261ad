// CreateBuiltinRule and the helpers the rules_*.cc files share.

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "rules_engine/profiler_report_rules.h"
#include "rules_engine/rule.h"
#include "rules_engine/rule_internal.h"

namespace debugplane::rules_engine {
namespace internal {

std::string StepLabel(const Step& step) {
  return absl::StrCat("step ", step.global_step, " (", ModeName(step.mode), " step ",
                      step.mode_step, ")");
}

std::string TensorLabel(const Tensor& tensor, const TrialInfo& info) {
  if (info.num_workers > 1 && !tensor.worker.empty()) {
    return absl::StrCat(tensor.name, " of ", tensor.worker);
  }
  return tensor.name;
}

std::string Num(double v) {
  // printf's %g keeps a NaN's sign bit ("-nan" for the 0/0 of x86), which
  // means nothing for a NaN and reads like a different value.
  if (std::isnan(v)) return "nan";
  return absl::StrFormat("%.6g", v);
}

std::string Clip(std::string details) {
  constexpr size_t kMax = 1024;
  if (details.size() > kMax) {
    details.resize(kMax - 3);
    details += "...";
  }
  return details;
}

double MeanAbs(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double sum = 0;
  for (double x : v) sum += std::fabs(x);
  return sum / static_cast<double>(v.size());
}

double Mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

double Variance(const std::vector<double>& v) {
  if (v.empty()) return 0;
  const double m = Mean(v);
  double sum = 0;
  for (double x : v) sum += (x - m) * (x - m);
  return sum / static_cast<double>(v.size());
}

double Percentile(std::vector<double> v, double percent) {
  if (v.empty()) return 0;
  const double pos = percent / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  // Selection, not a full sort: the same two order statistics in O(n).
  std::nth_element(v.begin(), v.begin() + lo, v.end());
  const double low = v[lo];
  const double high = hi == lo ? low : *std::min_element(v.begin() + lo + 1, v.end());
  return low + (high - low) * (pos - static_cast<double>(lo));
}

BatchView ViewAsBatch(const Tensor& t) {
  BatchView view;
  const int64_t n = static_cast<int64_t>(t.values.size());
  if (t.shape.size() >= 2 && t.shape[0] > 0 && n % t.shape[0] == 0) {
    view.batch = t.shape[0];
    view.units = n / t.shape[0];
  } else {
    view.batch = 1;
    view.units = n;
  }
  return view;
}

RuleVerdict EvaluatingRule::OnTrainingEnd(const TrialInfo& info) {
  if (evaluations_ > 0) return RuleVerdict::NoIssues(Clip(Summary()));
  return RuleVerdict::Error(
      Clip(absl::StrCat(MissingData(info), "; ", DescribeTrial(info, steps_read_))));
}

std::string EvaluatingRule::Summary() const {
  return absl::StrCat("no issue in ", evaluations_, " evaluations over ", steps_evaluated_,
                      " steps");
}

}  // namespace internal

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
  };
  return *makers;
}

// Built-in rules of SageMaker that are not tensor rules: profiler rules and
// report generators, evaluated elsewhere (or not at all).
bool IsNonTensorBuiltin(const std::string& name) {
  static const auto* names = new std::set<std::string>{
      "ProfilerReport",          "BatchSize",          "CPUBottleneck",
      "GPUMemoryIncrease",       "IOBottleneck",       "LoadBalancing",
      "LowGPUUtilization",       "OverallSystemUsage", "MaxInitializationTime",
      "OverallFrameworkMetrics", "StepOutlier",        "CreateXgboostReport",
      "DLProfilerReport"};
  return names->count(name) > 0;
}

absl::StatusOr<std::unique_ptr<Rule>> Create(const std::string& rule_name,
                                             const RuleParameters& parameters,
                                             const RuleContext& context) {
  auto it = Makers().find(rule_name);
  if (it == Makers().end()) {
    if (IsNonTensorBuiltin(rule_name)) {
      return absl::UnimplementedError(absl::StrCat(
          "built-in rule '", rule_name, "' is not a tensor rule and is not evaluated here"));
    }
    return absl::NotFoundError(
        absl::StrCat("unknown built-in rule '", rule_name,
                     "'; tensor rules: ", absl::StrJoin(BuiltinTensorRuleNames(), ", ")));
  }
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

absl::Status ValidateBuiltinRuleParameters(const std::string& rule_name,
                                           const RuleParameters& parameters) {
  if (IsProfilerRuleName(rule_name)) {
    return CreateProfilerRuleSet(rule_name, parameters).status();
  }
  // A stand-in lookup so that SimilarAcrossRuns validates its parameters
  // without access to the other trial; the rule built here is discarded.
  RuleContext context;
  context.other_trial = [](const std::string&, int64_t,
                           const std::string&) -> absl::StatusOr<Tensor> {
    return absl::NotFoundError("validation only");
  };
  return Create(rule_name, parameters, context).status();
}

}  // namespace debugplane::rules_engine
