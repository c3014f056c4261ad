// Shared pieces of the built-in tensor rules (rules_*.cc); not an API.

#ifndef DEBUGPLANE_RULES_ENGINE_RULE_INTERNAL_H_
#define DEBUGPLANE_RULES_ENGINE_RULE_INTERNAL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
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

// Which tensors a rule inspects, and at which steps: tensors in one of
// `collections`, matching one of `regexes` (Python re.match semantics) or
// named exactly one of `names`; with all three empty, every tensor if
// `all_when_empty`, else none. Steps: those of `modes` (empty: every mode).
// The one place rules decide what data is theirs (Rule::Wants).
class TensorSelector {
 public:
  TensorSelector() = default;
  TensorSelector(std::vector<std::string> collections, std::vector<std::string> regexes,
                 bool all_when_empty = false)
      : collections(std::move(collections)),
        regexes(std::move(regexes)),
        all_when_empty(all_when_empty) {}

  // How a rule takes its selection from its parameters.
  struct Parameters {
    bool collection_names = true;            // The rule has a collection_names parameter.
    std::vector<std::string> default_regex;  // tensor_regex when it is not given.
    bool all_when_empty = false;
  };
  // Reads `collection_names` (if the rule has it) and `tensor_regex` from
  // `p`, in that order (errors are recorded in `p`).
  static TensorSelector FromParameters(RuleParameterReader& p, const Parameters& how);
  static TensorSelector FromParameters(RuleParameterReader& p) {
    return FromParameters(p, Parameters());
  }
  // TRAIN and GLOBAL: the steps that train (EVAL and PREDICT passes do not
  // change weights and repeat the same samples).
  static std::vector<Mode> TrainingModes() { return {Mode::kTrain, Mode::kGlobal}; }

  std::vector<std::string> collections;
  std::vector<std::string> regexes;
  std::vector<std::string> names;
  bool all_when_empty = false;
  std::vector<Mode> modes;

  // Answers are remembered per tensor name for one TrialInfo (rules ask
  // about the same names at every step); not thread-safe, like the rule
  // that owns the selector.
  bool Matches(const std::string& tensor, const TrialInfo& info) const;
  // Whether `step`'s mode is one of `modes`.
  bool Selects(const Step& step) const;
  bool empty() const { return collections.empty() && regexes.empty() && names.empty(); }
  // "collection 'gradients'", "tensor_regex '.*relu_output' or
  // collection 'relu_output'", "any tensor".
  std::string Describe() const;

 private:
  bool Compute(const std::string& tensor, const TrialInfo& info) const;

  // The answers, for the TrialInfo instance and collection count below, in
  // the order first asked, and where each name is in that list. A rule asks
  // about a step's tensors in the same order at every step, so the entry
  // after the last one answered is nearly always the next question: one
  // string comparison instead of hashing the name.
  mutable std::vector<std::pair<std::string, bool>> memo_;
  mutable absl::flat_hash_map<std::string, size_t> memo_index_;
  mutable size_t memo_next_ = 0;
  mutable uint64_t memo_instance_ = 0;
  mutable size_t memo_collections_ = 0;
};

// Statistics over a tensor's values.
double MeanAbs(const std::vector<double>& v);
double Mean(const std::vector<double>& v);
double Variance(const std::vector<double>& v);  // Population variance (numpy's var).
// Exact scans, vectorized (several tensors' worth of values per step go
// through them): the count of values equal to 0, and whether none is NaN or
// infinite.
int64_t CountZeros(const std::vector<double>& v);
bool AllFinite(const std::vector<double>& v);
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

// An EvaluatingRule whose data is what `selector_` selects: Wants and
// RequiredCollections come from it, and CheckSelected runs the usual
// per-tensor check over a step.
class SelectingRule : public EvaluatingRule {
 public:
  SelectingRule(std::string name, TensorSelector selector)
      : EvaluatingRule(std::move(name)), selector_(std::move(selector)) {}

  bool Wants(const std::string& tensor, const TrialInfo& info) const override {
    return selector_.Matches(tensor, info);
  }
  std::vector<std::string> RequiredCollections() const override { return selector_.collections; }

 protected:
  // What checking one tensor found: nullopt when the tensor was not
  // evaluated (skipped), "" when it was and is fine, else the issue, as it
  // reads after "<step label>: <tensor label> ".
  using TensorCheck = absl::FunctionRef<absl::optional<std::string>(const Tensor&)>;
  // At a step of the selector's modes, checks each tensor with values that
  // the selector matches, in order; the first issue is the verdict (clipped).
  // Counts evaluated tensors, and the step if any was evaluated.
  RuleVerdict CheckSelected(const Step& step, const TrialInfo& info, TensorCheck check);

  TensorSelector selector_;
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
