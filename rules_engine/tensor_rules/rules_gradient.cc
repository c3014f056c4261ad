// Gradient and weight rules: VanishingGradient, ExplodingTensor,
// WeightUpdateRatio, PoorWeightInitialization.

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rules_engine/rule/percentile.h"
#include "rules_engine/tensor_rules/histogram_stats.h"
#include "rules_engine/tensor_rules/rule_internal.h"

namespace debugplane::rules_engine::internal {
namespace {

// The gradients: smdebug's built-in collection, whose include_regex is
// "^gradient"; the name prefix also catches them when the collections file
// does not list the collection.
TensorSelector Gradients() { return TensorSelector({"gradients"}, {"gradient/"}); }

// The weights, at the steps that update them.
TensorSelector Weights() {
  TensorSelector weights({"weights"}, {});
  weights.modes = TensorSelector::TrainingModes();
  return weights;
}

// --- VanishingGradient ----------------------------------------------------------
// smdebug: for each tensor of collection `gradients` at each step, the mean of
// |values| below `threshold` fires. A NaN mean (exploded gradient) is not
// "vanishing": ExplodingTensor reports it.
class VanishingGradient : public SelectingRule {
 public:
  explicit VanishingGradient(double threshold)
      : SelectingRule("VanishingGradient", Gradients()), threshold_(threshold) {
    accepts_histograms_ = true;
  }

 protected:
  RuleVerdict Evaluate(const Step& step, const TrialInfo& info) override {
    return CheckSelected(step, info, [this](const Tensor& t) -> absl::optional<std::string> {
      if (t.histogram) return CheckHistogram(*t.histogram);
      const double m = MeanAbs(t.values);
      if (m < threshold_)
        return absl::StrCat("mean |x| ", Num(m), " < threshold ", Num(threshold_));
      return "";
    });
  }

  // Every gradient with values is evaluated: only the selection can explain.
  std::string MissingData(const TrialInfo& info) const override {
    return WhyUnusedSelection(info, "tensor of collection 'gradients'");
  }

  std::string Summary() const override {
    std::string out = EvaluatingRule::Summary();
    if (bounded_ > 0) {
      absl::StrAppend(&out, "; ", bounded_,
                      " histogram evaluations could only bound mean |x| (last: between ",
                      Num(last_bound_.low), " and ", Num(last_bound_.high), ", threshold ",
                      Num(threshold_), ") and were not judged vanishing");
    }
    return out;
  }

 private:
  // A gradient logged as a histogram: its buckets bound mean |x|; vanishing
  // when even the upper bound is below the threshold, fine when the lower
  // bound is not, otherwise only a bound is possible (counted, said in the
  // status).
  absl::optional<std::string> CheckHistogram(const HistogramStats& h) {
    absl::optional<Bounds> b = MeanAbsBounds(h);
    if (!b) return absl::nullopt;  // Empty: nothing to judge.
    if (b->high < threshold_) {
      return absl::StrCat("mean |x| ", b->low == b->high ? "" : "at most ", Num(b->high),
                          " < threshold ", Num(threshold_), " (from its histogram of ",
                          Num(h.num), " values)");
    }
    if (b->low < threshold_) {
      ++bounded_;
      last_bound_ = *b;
    }
    return "";
  }

  double threshold_;
  int64_t bounded_ = 0;
  Bounds last_bound_;
};

// --- ExplodingTensor ------------------------------------------------------------
// Decision: with neither collection_names nor tensor_regex the rule inspects
// every tensor saved (the doc's "If no patterns are passed, the rule compares
// all tensors gathered"). Any NaN, or +-inf unless only_nan, fires.
class ExplodingTensor : public SelectingRule {
 public:
  ExplodingTensor(TensorSelector selector, bool only_nan)
      : SelectingRule("ExplodingTensor", std::move(selector)), only_nan_(only_nan) {
    accepts_histograms_ = true;
  }

 protected:
  RuleVerdict Evaluate(const Step& step, const TrialInfo& info) override {
    return CheckSelected(step, info, [this](const Tensor& t) -> absl::optional<std::string> {
      if (t.histogram) {
        absl::optional<std::string> bad = HistogramNonFinite(*t.histogram, only_nan_);
        if (!bad) return "";
        return absl::StrCat(
            *bad, only_nan_ ? " (only_nan: NaN is exploding)" : " (NaN or infinity is exploding)");
      }
      if (AllFinite(t)) return "";
      for (size_t i = 0; i < t.values.size(); ++i) {
        const double v = t.values[i];
        if (std::isnan(v) || (!only_nan_ && std::isinf(v))) {
          return absl::StrCat(
              "element ", i, " is ", Num(v),
              only_nan_ ? " (only_nan: NaN is exploding)" : " (NaN or infinity is exploding)");
        }
      }
      return "";
    });
  }

 private:
  bool only_nan_;
};

// --- WeightUpdateRatio ----------------------------------------------------------
// ratio = ||w(s) - w(prev)||_2 / (||w(prev)||_2 + epsilon) for each tensor of
// collection `weights`; above large_threshold or below small_threshold fires.
// Decisions: only TRAIN (and GLOBAL) steps count, since EVAL steps do not
// update weights and would always look "unchanged"; without num_steps the
// previous saved step is the comparison point, with num_steps a previous
// step older than s - num_steps is not compared (it becomes the new base).
// State: one copy of each weight tensor (inherent to the rule).
class WeightUpdateRatio : public SelectingRule {
 public:
  WeightUpdateRatio(absl::optional<int64_t> num_steps, double large, double small, double eps)
      : SelectingRule("WeightUpdateRatio", Weights()),
        num_steps_(num_steps),
        large_(large),
        small_(small),
        epsilon_(eps) {}

 protected:
  RuleVerdict Evaluate(const Step& step, const TrialInfo& info) override {
    return CheckSelected(step, info, [&](const Tensor& t) -> absl::optional<std::string> {
      Previous& prev = PreviousOf(t);
      const bool resized = prev.step >= 0 && prev.values.size() != t.values.size();
      const bool comparable = prev.step >= 0 && !resized &&
                              (!num_steps_ || step.global_step - prev.step <= *num_steps_);
      if (resized) ++resized_;
      absl::optional<std::string> issue;  // Not evaluated unless comparable.
      if (comparable) {
        double diff2 = 0, base2 = 0;
        // One pass: each weight is compared with its previous value and
        // widened into `next_`, which becomes the state kept for the next
        // save unless the ratio fires (then the previous save stays).
        const double* before = prev.values.data();
        next_.resize(prev.values.size());
        double* next = next_.data();
        t.values.Visit([&](const auto& values) {
          for (size_t i = 0; i < values.size(); ++i) {
            const double now = values[i];
            const double d = now - before[i];
            diff2 += d * d;
            base2 += before[i] * before[i];
            next[i] = now;
          }
        });
        const double ratio = std::sqrt(diff2) / (std::sqrt(base2) + epsilon_);
        if (ratio > large_ || ratio < small_) {
          return absl::StrCat("update/weight ratio ", Num(ratio), " since step ", prev.step,
                              ratio > large_ ? " > large_threshold " : " < small_threshold ",
                              Num(ratio > large_ ? large_ : small_));
        }
        issue = "";
        prev.values.swap(next_);
      } else {
        t.values.CopyTo(&prev.values);  // Owned: a view would keep its whole buffer.
      }
      prev.step = step.global_step;
      return issue;
    });
  }

  std::string MissingData(const TrialInfo& info) const override {
    const std::string why = WhyUnusedSelection(info, "weight tensor");
    if (!why.empty()) return why;
    // Weights were saved at training steps but never compared.
    const int64_t saved = seen_.steps().Of(selector_.modes);
    const std::string modes = ModesName(selector_.modes);
    if (saved == 1) {
      return absl::StrCat(seen_.NamesWere(), " saved at 1 ", modes,
                          " step only: an update ratio needs two");
    }
    std::string out = absl::StrCat(seen_.NamesWere(), " saved at ", saved, " ", modes, " steps");
    if (num_steps_) {
      absl::StrAppend(&out, ", never two within num_steps (", *num_steps_, ") of each other");
    }
    if (resized_ > 0) {
      absl::StrAppend(&out, "; a tensor had another size than at its previous save (",
                      Times(resized_), ")");
    }
    return out;
  }

 private:
  struct Previous {
    int64_t step = -1;
    std::vector<double> values;
  };
  // The weights being compared, widened (swapped into Previous::values).
  std::vector<double> next_;
  // Orders (name, worker) keys against string_view pairs too: a lookup of
  // a tensor seen before copies no string.
  struct KeyLess {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return std::tie(a.first, a.second) < std::tie(b.first, b.second);
    }
  };
  Previous& PreviousOf(const Tensor& t) {
    using View = std::pair<absl::string_view, absl::string_view>;
    auto it = previous_.find(View(t.name, t.worker));
    if (it == previous_.end()) it = previous_.try_emplace({t.name, t.worker}).first;
    return it->second;
  }

  absl::optional<int64_t> num_steps_;
  double large_, small_, epsilon_;
  std::map<std::pair<std::string, std::string>, Previous, KeyLess> previous_;
  int64_t resized_ = 0;  // Saves not compared: another size than the previous one.
};

// --- PoorWeightInitialization ---------------------------------------------------
// Analyses the first `steps` TRAIN steps (mode step < steps), three checks:
//  1. activation inputs (activation_inputs_regex): the ratio of the largest
//     to the smallest per-layer variance at a step above `threshold` fires;
//  2. gradients: decision: all gradient values of a step pooled into one
//     distribution (per-tensor percentiles of tiny bias vectors are noise);
//     95th - 5th percentile below distribution_range fires;
//  3. loss (collection 'losses'): no new minimum for `patience` consecutive
//     analysed steps fires.
// Whichever data is missing is skipped; none of the three -> kError.
class PoorWeightInitialization : public EvaluatingRule {
 public:
  PoorWeightInitialization(std::vector<std::string> activation_regex, double threshold,
                           double distribution_range, int64_t patience, int64_t steps)
      : EvaluatingRule("PoorWeightInitialization"),
        activations_({}, std::move(activation_regex)),
        threshold_(threshold),
        distribution_range_(distribution_range),
        patience_(patience),
        steps_(steps) {
    gradients_.modes = TensorSelector::TrainingModes();
  }

  bool Wants(const std::string& tensor, const TrialInfo& info) const override {
    return activations_.Matches(tensor, info) || gradients_.Matches(tensor, info) ||
           losses_.Matches(tensor, info);
  }
  std::vector<std::string> RequiredCollections() const override { return {"gradients", "losses"}; }

 protected:
  RuleVerdict Evaluate(const Step& step, const TrialInfo& info) override {
    if (!gradients_.Selects(step)) {
      if (!window_over_) NoteNotAnalysed(step, info);
      return RuleVerdict::Continue();
    }
    if (step.mode_step >= steps_) {
      window_over_ = true;
      return RuleVerdict::Continue();
    }
    const StepSample sample = Sample(step, info);
    bool any = false;
    for (auto check : {&PoorWeightInitialization::CheckActivationVariance,
                       &PoorWeightInitialization::CheckGradientWidth,
                       &PoorWeightInitialization::CheckLossConvergence}) {
      absl::optional<RuleVerdict> issue = (this->*check)(step, info, sample, any);
      if (issue.has_value()) return *std::move(issue);
    }
    if (any) ++steps_evaluated_;
    return RuleVerdict::Continue();
  }

 private:
  // What one step holds for the three checks.
  struct StepSample {
    // The activation inputs of the lowest and highest variance.
    const Tensor* min_t = nullptr;
    const Tensor* max_t = nullptr;
    double min_v = std::numeric_limits<double>::infinity(), max_v = -1;
    bool gradient_saved = false;  // Its values are in gradient_values_.
    double loss_sum = 0;
    int loss_count = 0;
  };

  StepSample Sample(const Step& step, const TrialInfo& info) {
    StepSample sample;
    gradient_values_.clear();
    for (const Tensor& t : step.tensors) {
      if (t.values.empty()) continue;
      if (activations_.Matches(t.name, info)) {
        const double v = Variance(t.values);
        if (v < sample.min_v) sample.min_v = v, sample.min_t = &t;
        if (v > sample.max_v) sample.max_v = v, sample.max_t = &t;
      } else if (gradients_.Matches(t.name, info)) {
        sample.gradient_saved = true;
        t.values.AppendTo(&gradient_values_);
      } else if (losses_.Matches(t.name, info)) {
        sample.loss_sum += Mean(t.values);
        ++sample.loss_count;
      }
    }
    return sample;
  }

  // Each check: the issue it found, if any; sets `any` when it evaluated.
  // 1. Activation input variances across layers.
  absl::optional<RuleVerdict> CheckActivationVariance(const Step& step, const TrialInfo& info,
                                                      const StepSample& sample, bool& any) {
    const Tensor* min_t = sample.min_t;
    const Tensor* max_t = sample.max_t;
    const double min_v = sample.min_v, max_v = sample.max_v;
    if (min_t == nullptr || max_t == nullptr || min_t == max_t) {
      if (min_t != nullptr) ++one_activation_layer_;
      return absl::nullopt;
    }
    any = true;
    ++evaluations_;
    const double ratio = min_v > 0 ? max_v / min_v : std::numeric_limits<double>::infinity();
    if (ratio <= threshold_) return absl::nullopt;
    return RuleVerdict::Issues(Clip(
        absl::StrCat(StepLabel(step), ": activation input variance ratio ", Num(ratio), " (",
                     TensorLabel(*max_t, info), " ", Num(max_v), " / ", TensorLabel(*min_t, info),
                     " ", Num(min_v), ") > threshold ", Num(threshold_))));
  }

  // 2. Gradient distribution width.
  absl::optional<RuleVerdict> CheckGradientWidth(const Step& step, const TrialInfo& /*info*/,
                                                 const StepSample& sample, bool& any) {
    std::vector<double>& gradient_values = gradient_values_;
    if (gradient_values.size() < 2) {
      if (sample.gradient_saved) ++one_gradient_value_;
      return absl::nullopt;
    }
    any = true;
    ++evaluations_;
    const auto [p5, p95] = LinearInterpolatedPercentiles(&gradient_values, 5, 95);
    if (p95 - p5 >= distribution_range_) return absl::nullopt;
    return RuleVerdict::Issues(Clip(absl::StrCat(
        StepLabel(step), ": gradients' 95th - 5th percentile ", Num(p95 - p5), " (",
        gradient_values.size(), " values) < distribution_range ", Num(distribution_range_))));
  }

  // 3. Loss convergence over the first steps.
  absl::optional<RuleVerdict> CheckLossConvergence(const Step& step, const TrialInfo& /*info*/,
                                                   const StepSample& sample, bool& any) {
    if (sample.loss_count == 0) return absl::nullopt;
    any = true;
    ++evaluations_;
    const double loss = sample.loss_sum / sample.loss_count;
    if (!best_loss_ || loss < *best_loss_) {
      best_loss_ = loss;
      steps_without_improvement_ = 0;
      return absl::nullopt;
    }
    if (++steps_without_improvement_ < patience_) return absl::nullopt;
    return RuleVerdict::Issues(
        Clip(absl::StrCat(StepLabel(step), ": loss ", Num(loss), " has not improved on ",
                          Num(*best_loss_), " for ", steps_without_improvement_,
                          " steps (patience ", patience_, ") in the first ", steps_, " steps")));
  }

 protected:
  std::string MissingData(const TrialInfo& info) const override {
    const std::vector<Mode>& modes = gradients_.modes;
    if (steps_read().Of(modes) == 0) {
      return absl::StrCat("no ", ModesName(modes), " step: the rule analyses the first ", steps_,
                          " training steps and the trial has ",
                          steps_read().DescribeAgainst(modes));
    }
    std::string out = absl::StrCat(
        "in the first ", steps_, " ", ModesName(modes), " steps no activation input (",
        activations_.Describe(),
        ") in two layers, gradient (collection 'gradients') or loss (collection 'losses') "
        "was saved");
    std::vector<std::string> instead;
    if (one_activation_layer_ > 0) {
      instead.push_back(absl::StrCat("one activation input layer only, at ", one_activation_layer_,
                                     " steps: the variance ratio needs two"));
    }
    if (one_gradient_value_ > 0) {
      instead.push_back(absl::StrCat("a single gradient value, at ", one_gradient_value_,
                                     " steps: percentiles need two"));
    }
    const std::pair<const char*, const SelectionSeen*> others[] = {
        {"activation input ", &other_modes_activations_},
        {"gradient ", &other_modes_gradients_},
        {"loss ", &other_modes_losses_}};
    for (const auto& [label, seen] : others) {
      if (!seen->any()) continue;
      instead.push_back(absl::StrCat(label, seen->NamesWere(), " saved at ",
                                     seen->steps().Describe(), ", which are not analysed"));
    }
    if (instead.empty()) {
      absl::StrAppend(&out, "; ", TrialTensors(info),
                      CollectionNotes({"gradients", "losses"}, info));
    } else {
      absl::StrAppend(&out, "; instead: ", absl::StrJoin(instead, "; "));
    }
    return out;
  }

 private:
  // Notes the selected tensors of a step of another mode, for MissingData.
  void NoteNotAnalysed(const Step& step, const TrialInfo& info) {
    for (const Tensor& t : step.tensors) {
      if (activations_.Matches(t.name, info)) {
        other_modes_activations_.Note(step, t);
      } else if (gradients_.Matches(t.name, info)) {
        other_modes_gradients_.Note(step, t);
      } else if (losses_.Matches(t.name, info)) {
        other_modes_losses_.Note(step, t);
      }
    }
  }

  // A step's gradient values pooled (kept to reuse its allocation).
  std::vector<double> gradient_values_;
  // Each at TRAIN (and GLOBAL) steps: weight initialization shows in training.
  TensorSelector activations_;
  TensorSelector gradients_ = Gradients();
  TensorSelector losses_{{"losses"}, {}};
  double threshold_, distribution_range_;
  int64_t patience_, steps_;
  absl::optional<double> best_loss_;
  int64_t steps_without_improvement_ = 0;
  // A training step past the first `steps_` was seen: steps of other modes
  // are not noted any more (MissingData explains the first steps).
  bool window_over_ = false;
  // Why analysed steps gave nothing: counts of steps.
  int64_t one_activation_layer_ = 0, one_gradient_value_ = 0;
  // The selected tensors of steps of other modes, until the window is over.
  SelectionSeen other_modes_activations_, other_modes_gradients_, other_modes_losses_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Rule>> MakeVanishingGradient(RuleParameterReader& p,
                                                            const RuleContext&) {
  const double threshold = p.Float("threshold", 0.0000001, 0);
  if (absl::Status s = p.status(); !s.ok()) return s;
  return std::make_unique<VanishingGradient>(threshold);
}

absl::StatusOr<std::unique_ptr<Rule>> MakeExplodingTensor(RuleParameterReader& p,
                                                          const RuleContext&) {
  TensorSelector selector = TensorSelector::FromParameters(p, {.all_when_empty = true});
  const bool only_nan = p.Bool("only_nan", false);
  if (absl::Status s = p.status(); !s.ok()) return s;
  return std::make_unique<ExplodingTensor>(std::move(selector), only_nan);
}

absl::StatusOr<std::unique_ptr<Rule>> MakeWeightUpdateRatio(RuleParameterReader& p,
                                                            const RuleContext&) {
  const absl::optional<int64_t> num_steps =
      p.OptionalInt("num_steps", 1, std::numeric_limits<int64_t>::max());
  const double large = p.Float("large_threshold", 10.0, 0);
  const double small = p.Float("small_threshold", 0.00000001, 0);
  const double epsilon = p.Float("epsilon", 0.000000001, 0);
  if (p.status().ok() && small > large) {
    p.Fail("small_threshold", absl::StrCat("must not exceed large_threshold (", Num(large), ")"));
  }
  if (absl::Status s = p.status(); !s.ok()) return s;
  return std::make_unique<WeightUpdateRatio>(num_steps, large, small, epsilon);
}

absl::StatusOr<std::unique_ptr<Rule>> MakePoorWeightInitialization(RuleParameterReader& p,
                                                                   const RuleContext&) {
  std::vector<std::string> regex = p.RegexList("activation_inputs_regex", {".*relu_input"});
  const double threshold = p.Float("threshold", 10.0, 1);
  const double range = p.Float("distribution_range", 0.001, 0);
  const int64_t patience = p.Int("patience", 5, 1);
  const int64_t steps = p.Int("steps", 10, 1);
  if (absl::Status s = p.status(); !s.ok()) return s;
  return std::make_unique<PoorWeightInitialization>(std::move(regex), threshold, range, patience,
                                                    steps);
}

}  // namespace debugplane::rules_engine::internal
