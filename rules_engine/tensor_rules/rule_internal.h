// Shared pieces of the built-in tensor rules (rules_*.cc); not an API.

#ifndef DEBUGPLANE_RULES_ENGINE_TENSOR_RULES_RULE_INTERNAL_H_
#define DEBUGPLANE_RULES_ENGINE_TENSOR_RULES_RULE_INTERNAL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "rules_engine/rule/rule.h"
#include "rules_engine/rule/rule_parameters.h"
#include "rules_engine/smdebug/step.h"

namespace debugplane::rules_engine::internal {

// "step 12 (TRAIN step 10)".
std::string StepLabel(const Step& step);
// The tensor's name, plus its worker when the trial has several.
std::string TensorLabel(const Tensor& tensor, const TrialInfo& info);
// A number for details: shortest round-trip-ish %g form.
std::string Num(double v);
// RuleVerdict details are at most 1024 characters.
std::string Clip(std::string details);

// --- What a rule was given, for kError details ----------------------------------
// An Error says what was missing, what was there instead and why it did not
// count, e.g. "no labels tensor was saved (labels_regex '.*labels'); the
// trial has 17 tensors (by its collections file): 'CrossEntropyLoss_output_0',
// ... and 7 more (collection 'labels' is not saved by the hook)", or "... the
// trial has 12 EVAL steps and 0 TRAIN/GLOBAL steps". Lists of names are
// bounded (kMaxListedNames, then "and N more"); names from the trial are
// escaped and cut (they come from files).

constexpr size_t kMaxListedNames = 10;

// `name` from a trial, escaped and cut to at most 40 characters (as the
// trial reader's messages cut tensor names), between single quotes: a list
// of kMaxListedNames names stays well within a RuleVerdict's 1024.
std::string QuoteName(absl::string_view name);
// "once", "3 times".
std::string Times(int64_t n);
// "'a', 'b', 'c' and 7 more" for names[0..max) of `total` names (total >=
// names.size()); "" for none.
std::string ListNames(const std::vector<std::string>& names, size_t total,
                      size_t max = kMaxListedNames);

// The steps a rule was given, by mode.
class ModeCounts {
 public:
  void Add(Mode mode) { ++counts_[Index(mode)]; }
  int64_t Of(Mode mode) const { return counts_[Index(mode)]; }
  // The steps of `modes`; all steps when `modes` is empty.
  int64_t Of(const std::vector<Mode>& modes) const;
  int64_t Total() const;
  // "60 TRAIN steps and 12 EVAL steps", "1 GLOBAL step", "no step".
  std::string Describe() const;
  // The steps of the other modes and then those of `modes`, even when 0:
  // "12 EVAL steps and 0 TRAIN/GLOBAL steps". Describe() for empty `modes`.
  std::string DescribeAgainst(const std::vector<Mode>& modes) const;

 private:
  // A value outside smdebug's modes (the readers refuse them) counts as
  // GLOBAL rather than indexing out of bounds.
  static size_t Index(Mode mode) {
    const int v = static_cast<int>(mode);
    return v >= 1 && v <= 4 ? static_cast<size_t>(v - 1) : 3;
  }
  int64_t counts_[4] = {0, 0, 0, 0};  // By Index(mode).
};

// "TRAIN/GLOBAL" for {kTrain, kGlobal}; "" for none (every mode).
std::string ModesName(const std::vector<Mode>& modes);

// What a rule's selection found in the steps it was given (whichever their
// mode): the steps that held a selected tensor with values, by mode, the
// selected tensors that had no values, and the first names. Note() costs a
// few comparisons per tensor; steps must come in ascending order, as they do.
class SelectionSeen {
 public:
  // Records that `step` held the selected tensor `tensor`.
  void Note(const Step& step, const Tensor& tensor);
  // Steps that held a selected tensor with values, by mode.
  const ModeCounts& steps() const { return steps_; }
  // Selected tensors seen without values (a string dtype or an empty shape;
  // a histogram counts as values).
  int64_t without_values() const { return without_values_; }
  bool any() const { return steps_.Total() > 0 || without_values_ > 0; }
  // "'labels', 'y' and more" (the first kMaxListedNames distinct names).
  std::string Names() const;
  // "'labels' was" or "'labels', 'y' were": Names() with its verb.
  std::string NamesWere() const;

 private:
  ModeCounts steps_;
  int64_t last_counted_step_ = -1;
  bool counted_any_ = false;
  int64_t without_values_ = 0;
  std::vector<std::string> names_;  // At most kMaxListedNames.
  // Where the next name is expected in names_: steps hold the same tensors
  // in the same order, so one comparison usually finds a name noted before.
  size_t next_name_ = 0;
  bool more_names_ = false;
};

// The tensor names the trial's collections file lists (smdebug records each
// saved tensor in its collections), as "the trial has 17 tensors (by its
// collections file): 'a', 'b', ... and 7 more", or says that there is no
// such file or that it lists no names. (The scheduler appends the names the
// reader found in the index files.)
std::string TrialTensors(const TrialInfo& info);
// Why the collections a rule reads gave nothing, as " (collection 'labels'
// is not saved by the hook)" (with a leading space), or "" when there is
// nothing to say: a collection missing from a trial that has a collections
// file, one with neither include_regex nor tensor names, one that lists no
// tensor when others do (smdebug lists what it saved), and include_regex
// patterns that cannot be used.
std::string CollectionNotes(const std::vector<std::string>& collections, const TrialInfo& info);

// Why a rule whose data is `what` (a noun phrase: "tensor of collection
// 'gradients'", "labels tensor"), selected by `selection` (e.g.
// "tensor_regex '.*labels'"; may be empty), found nothing to evaluate, given
// what its selection saw (`seen`) in the steps it was given (`steps`), the
// modes it reads (`modes`, empty: all) and the collections the hook must
// save for it. The first that applies:
//   "no step was read (the rule needs a <what> (<selection>))";
//   "no <what> was saved (<selection>); <TrialTensors><CollectionNotes>",
//    plus, when no step has one of `modes`, "; besides, the rule reads
//    TRAIN/GLOBAL steps and the trial has 12 EVAL steps and 0 TRAIN/GLOBAL
//    steps";
//   "no <what> (<selection>) at a TRAIN/GLOBAL step, the steps the rule
//    reads: 'x' was saved at 12 EVAL steps only; the trial has 12 EVAL
//    steps and 0 TRAIN/GLOBAL steps";
//   "every <what> (<selection>) was saved without values (3 times: a string
//    dtype or an empty shape): 'x'";
//   "" when the selection did find data (the rule says why it did not count).
std::string WhyUnused(absl::string_view what, absl::string_view selection,
                      const SelectionSeen& seen, const ModeCounts& steps,
                      const std::vector<Mode>& modes, const TrialInfo& info,
                      const std::vector<std::string>& collections);

// What the trial holds, appended to every kError of a rule: the steps read
// by mode and the collections saved with their tensor counts (at most
// kMaxListedNames), e.g. "read 60 TRAIN steps and 12 EVAL steps; collections
// saved (tensor count): biases (3), gradients (6), losses (1)".
std::string DescribeTrial(const TrialInfo& info, const ModeCounts& steps);

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

// Statistics over a tensor's values, read where they lie (each value
// widened as it is read; no copy). The sums run in element order, so they
// are the same doubles as over a vector<double> of the values.
double MeanAbs(const TensorValues& v);
double Mean(const TensorValues& v);
double Variance(const TensorValues& v);  // Population variance (numpy's var).
// Exact scans, vectorized (several tensors' worth of values per step go
// through them): the count of values equal to 0, and whether none is NaN or
// infinite.
int64_t CountZeros(const std::vector<double>& v);
bool AllFinite(const std::vector<double>& v);
int64_t CountZeros(const TensorValues& v);
bool AllFinite(const TensorValues& v);
// The same for a tensor's values, from the facts its decoder found when it
// has them (Tensor::facts), else by scanning.
int64_t CountZeros(const Tensor& t);
bool AllFinite(const Tensor& t);
// The batch dimension and the per-sample size of a tensor: shape[0] and the
// product of the other dimensions (a 1-D tensor is one sample of n units;
// a scalar or shapeless tensor is one sample of its values).
struct BatchView {
  int64_t batch = 1;
  int64_t units = 0;
};
BatchView ViewAsBatch(const Tensor& t);

// A rule that concludes NoIssuesFound at the end when it evaluated
// something and kError (saying what it needed, what was there instead and
// why it did not count) when it did not. Counts the steps it is given by
// mode (OnStep), then lets the rule Evaluate them.
class EvaluatingRule : public Rule {
 public:
  explicit EvaluatingRule(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  RuleVerdict OnStep(const Step& step, const TrialInfo& info) final {
    steps_read_.Add(step.mode);
    return Evaluate(step, info);
  }
  RuleVerdict OnTrainingEnd(const TrialInfo& info) override;

 protected:
  // Rule::OnStep, after the step was counted.
  virtual RuleVerdict Evaluate(const Step& step, const TrialInfo& info) = 0;
  // Why nothing was evaluated, what was there instead and why it did not
  // count, e.g. "no tensor of collection 'gradients' was saved (...); the
  // trial has 3 tensors (by its collections file): ..." (see WhyUnused);
  // DescribeTrial is appended.
  virtual std::string MissingData(const TrialInfo& info) const = 0;
  // A summary for NoIssuesFound, e.g. "no issue in 432 evaluations over 72
  // steps".
  virtual std::string Summary() const;
  // The steps given to OnStep, by mode.
  const ModeCounts& steps_read() const { return steps_read_; }

  int64_t evaluations_ = 0;  // Tensors (or comparisons) evaluated.
  int64_t steps_evaluated_ = 0;

 private:
  std::string name_;
  ModeCounts steps_read_;
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
  // WhyUnusedSelection(info), for a rule that evaluates every selected
  // tensor with values; a rule that skips some says why in its own.
  std::string MissingData(const TrialInfo& info) const override { return WhyUnusedSelection(info); }
  // What checking one tensor found: nullopt when the tensor was not
  // evaluated (skipped), "" when it was and is fine, else the issue, as it
  // reads after "<step label>: <tensor label> ".
  using TensorCheck = absl::FunctionRef<absl::optional<std::string>(const Tensor&)>;
  // At a step of the selector's modes, checks each tensor with values that
  // the selector matches, in order; the first issue is the verdict (clipped).
  // Counts evaluated tensors, and the step if any was evaluated. Notes every
  // matched tensor, at steps of any mode, in seen_.
  RuleVerdict CheckSelected(const Step& step, const TrialInfo& info, TensorCheck check);
  // Notes in seen_ the tensors of `step` the selector matches (any mode).
  void NoteSelected(const Step& step, const TrialInfo& info);
  // Notes in seen_ the tensors of `step` this rule Wants (any mode) and
  // returns those with values, in order.
  std::vector<std::reference_wrapper<const Tensor>> NoteWantedWithValues(const Step& step,
                                                                         const TrialInfo& info);
  // WhyUnused for the selector's data: `what` ("tensor" when empty),
  // selected as the selector's Describe() says.
  std::string WhyUnusedSelection(const TrialInfo& info, absl::string_view what = "") const;

  TensorSelector selector_;
  SelectionSeen seen_;
  // CheckSelected also passes tensors logged as histograms (Tensor::
  // histogram, no values) to the check: set by rules that judge them.
  bool accepts_histograms_ = false;
};

// What makes a rule from its parameters (the catalog's entries).
using RuleMakerFunction = absl::StatusOr<std::unique_ptr<Rule>>(RuleParameterReader& params,
                                                                const RuleContext& ctx);
using RuleMaker = RuleMakerFunction*;

// One per rule, defined in the rules_*.cc files. Each reads every parameter
// it declares from `params` and returns params.status() if it is not OK.
RuleMakerFunction MakeVanishingGradient;
RuleMakerFunction MakeExplodingTensor;
RuleMakerFunction MakeWeightUpdateRatio;
RuleMakerFunction MakePoorWeightInitialization;
RuleMakerFunction MakeLossNotDecreasing;
RuleMakerFunction MakeOverfit;
RuleMakerFunction MakeOvertraining;
RuleMakerFunction MakeDeadRelu;
RuleMakerFunction MakeSaturatedActivation;
RuleMakerFunction MakeTensorVariance;
RuleMakerFunction MakeUnchangedTensor;
RuleMakerFunction MakeAllZero;
RuleMakerFunction MakeSimilarAcrossRuns;
RuleMakerFunction MakeClassImbalance;
RuleMakerFunction MakeCheckInputImages;
RuleMakerFunction MakeNLPSequenceRatio;
RuleMakerFunction MakeConfusion;
RuleMakerFunction MakeFeatureImportanceOverweight;
RuleMakerFunction MakeTreeDepth;
RuleMakerFunction MakeStalledTrainingRule;

}  // namespace debugplane::rules_engine::internal

#endif  // DEBUGPLANE_RULES_ENGINE_TENSOR_RULES_RULE_INTERNAL_H_
