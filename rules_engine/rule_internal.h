// Shared pieces of the built-in tensor rules (rules_*.cc); not an API.

#ifndef DEBUGPLANE_RULES_ENGINE_RULE_INTERNAL_H_
#define DEBUGPLANE_RULES_ENGINE_RULE_INTERNAL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rules_engine/rule.h"
#include "rules_engine/rule_parameters.h"
#include "rules_engine/step.h"

namespace debugplane::rules_engine::internal {

// "step 12 (TRAIN step 10)".
std::string StepLabel(const Step& step);
// The tensor's name, plus its worker when the trial has several.
std::string TensorLabel(const Tensor& tensor, const TrialInfo& info);
// A number for details: shortest round-trip-ish %g form.
std::string Num(double v);
// RuleVerdict details are at most 1024 characters.
std::string Clip(std::string details);
// What the trial holds, for kError details: its collections with their
// tensor counts and some tensor names, bounded.
std::string DescribeTrial(const TrialInfo& info);

// Which tensors a rule inspects: the union of `collections` and `regexes`
// (Python re.match semantics). With both empty, all tensors if
// `all_when_empty`, else none.
struct TensorSelector {
  std::vector<std::string> collections;
  std::vector<std::string> regexes;
  bool all_when_empty = false;

  bool Matches(const std::string& tensor, const TrialInfo& info) const;
  bool empty() const { return collections.empty() && regexes.empty(); }
  // "collection 'gradients'", "tensors matching '.*relu_output' or
  // collection 'relu_output'", "any tensor".
  std::string Describe() const;
};

// Statistics over a tensor's values.
double MeanAbs(const std::vector<double>& v);
double Mean(const std::vector<double>& v);
double Variance(const std::vector<double>& v);  // Population variance (numpy's var).
// numpy.percentile's default (linear interpolation); `v` is copied.
double Percentile(std::vector<double> v, double percent);
// The batch dimension and the per-sample size of a tensor: shape[0] and the
// product of the other dimensions (a 1-D tensor is one sample of n units;
// a scalar or shapeless tensor is one sample of its values).
struct BatchView {
  int64_t batch = 1;
  int64_t units = 0;
};
BatchView ViewAsBatch(const Tensor& t);

// A rule that concludes NoIssuesFound at the end when it evaluated
// something and kError (saying what it needed) when it did not.
class EvaluatingRule : public Rule {
 public:
  explicit EvaluatingRule(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  RuleVerdict OnTrainingEnd(const TrialInfo& info) override;

 protected:
  // Why nothing was evaluated, e.g. "no tensor of collection 'gradients'
  // was saved"; DescribeTrial is appended.
  virtual std::string MissingData() const = 0;
  // A summary for NoIssuesFound, e.g. "checked 432 tensors in 72 steps".
  virtual std::string Summary() const;

  int64_t evaluations_ = 0;  // Tensors (or comparisons) evaluated.
  int64_t steps_evaluated_ = 0;

 private:
  std::string name_;
};

using RuleMaker = absl::StatusOr<std::unique_ptr<Rule>> (*)(RuleParameterReader& params,
                                                            const RuleContext& ctx);

// One per rule, defined in the rules_*.cc files. Each reads every parameter
// it declares from `params` and returns params.status() if it is not OK.
absl::StatusOr<std::unique_ptr<Rule>> MakeVanishingGradient(RuleParameterReader&,
                                                            const RuleContext&);
absl::StatusOr<std::unique_ptr<Rule>> MakeExplodingTensor(RuleParameterReader&, const RuleContext&);
absl::StatusOr<std::unique_ptr<Rule>> MakeWeightUpdateRatio(RuleParameterReader&,
                                                            const RuleContext&);
absl::StatusOr<std::unique_ptr<Rule>> MakePoorWeightInitialization(RuleParameterReader&,
                                                                   const RuleContext&);
absl::StatusOr<std::unique_ptr<Rule>> MakeLossNotDecreasing(RuleParameterReader&,
                                                            const RuleContext&);
absl::StatusOr<std::unique_ptr<Rule>> MakeOverfit(RuleParameterReader&, const RuleContext&);
absl::StatusOr<std::unique_ptr<Rule>> MakeOvertraining(RuleParameterReader&, const RuleContext&);
absl::StatusOr<std::unique_ptr<Rule>> MakeDeadRelu(RuleParameterReader&, const RuleContext&);
absl::StatusOr<std::unique_ptr<Rule>> MakeSaturatedActivation(RuleParameterReader&,
                                                              const RuleContext&);
absl::StatusOr<std::unique_ptr<Rule>> MakeTensorVariance(RuleParameterReader&, const RuleContext&);
absl::StatusOr<std::unique_ptr<Rule>> MakeUnchangedTensor(RuleParameterReader&, const RuleContext&);
absl::StatusOr<std::unique_ptr<Rule>> MakeAllZero(RuleParameterReader&, const RuleContext&);
absl::StatusOr<std::unique_ptr<Rule>> MakeSimilarAcrossRuns(RuleParameterReader&,
                                                            const RuleContext&);
absl::StatusOr<std::unique_ptr<Rule>> MakeClassImbalance(RuleParameterReader&, const RuleContext&);
absl::StatusOr<std::unique_ptr<Rule>> MakeCheckInputImages(RuleParameterReader&,
                                                           const RuleContext&);
absl::StatusOr<std::unique_ptr<Rule>> MakeNLPSequenceRatio(RuleParameterReader&,
                                                           const RuleContext&);
absl::StatusOr<std::unique_ptr<Rule>> MakeConfusion(RuleParameterReader&, const RuleContext&);
absl::StatusOr<std::unique_ptr<Rule>> MakeFeatureImportanceOverweight(RuleParameterReader&,
                                                                      const RuleContext&);
absl::StatusOr<std::unique_ptr<Rule>> MakeTreeDepth(RuleParameterReader&, const RuleContext&);
absl::StatusOr<std::unique_ptr<Rule>> MakeStalledTrainingRule(RuleParameterReader&,
                                                              const RuleContext&);

}  // namespace debugplane::rules_engine::internal

#endif  // DEBUGPLANE_RULES_ENGINE_RULE_INTERNAL_H_
