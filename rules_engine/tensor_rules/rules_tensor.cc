// Generic tensor rules: TensorVariance, UnchangedTensor, AllZero,
// SimilarAcrossRuns.

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rules_engine/tensor_rules/histogram_stats.h"
#include "rules_engine/tensor_rules/rule_internal.h"

namespace debugplane::rules_engine::internal {
namespace {

// numpy.allclose(a, b, rtol, atol, equal_nan): |a - b| <= atol + rtol * |b|.
// Returns the index of the first element of `a` (readers of TensorValues::
// Visit; b at least as long) that is not close, or -1.
template <typename A, typename B>
int64_t FirstNotCloseIn(const A& a, const B& b, double rtol, double atol, bool equal_nan) {
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = a[i], y = b[i];
    if (std::isnan(x) || std::isnan(y)) {
      if (equal_nan && std::isnan(x) && std::isnan(y)) continue;
      return static_cast<int64_t>(i);
    }
    if (std::isinf(x) || std::isinf(y)) {
      if (x == y) continue;
      return static_cast<int64_t>(i);
    }
    if (std::fabs(x - y) > atol + rtol * std::fabs(y)) return static_cast<int64_t>(i);
  }
  return -1;
}

// REQUIRES: b.size() >= a.size() (in both).
int64_t FirstNotClose(const TensorValues& a, const std::vector<double>& b, double rtol,
                      double atol, bool equal_nan) {
  const DoubleElements before{reinterpret_cast<const char*>(b.data()), b.size()};
  return a.Visit([&](const auto& now) {
    return FirstNotCloseIn(now, before, rtol, atol, equal_nan);
  });
}
int64_t FirstNotClose(const TensorValues& a, const TensorValues& b, double rtol, double atol,
                      bool equal_nan) {
  return a.Visit([&](const auto& ra) {
    return b.Visit([&](const auto& rb) { return FirstNotCloseIn(ra, rb, rtol, atol, equal_nan); });
  });
}

// "You must specify either collection_names or tensor_regex" rules.
void RequireSelection(RuleParameterReader& p, const TensorSelector& s) {
  if (p.status().ok() && s.empty()) {
    p.Fail("collection_names", "or 'tensor_regex' must be given (the rule inspects their union)");
  }
}

// --- TensorVariance -------------------------------------------------------------
// The variance (numpy.var) of each selected tensor at each step above
// max_threshold or below min_threshold fires. Decision: both thresholds
// default to None in the doc, which would make the rule inert: at least one
// is required (INVALID_ARGUMENT names max_threshold otherwise).
class TensorVariance : public SelectingRule {
 public:
  TensorVariance(TensorSelector selector, absl::optional<double> max, absl::optional<double> min)
      : SelectingRule("TensorVariance", std::move(selector)), max_(max), min_(min) {
    accepts_histograms_ = true;
  }

 protected:
  RuleVerdict Evaluate(const Step& step, const TrialInfo& info) override {
    return CheckSelected(step, info, [this](const Tensor& t) -> absl::optional<std::string> {
      absl::optional<double> of_histogram;
      if (t.histogram) {
        // From num, sum and sum_squares (estimated from buckets in TF2's form).
        of_histogram = HistogramVariance(*t.histogram);
        if (!of_histogram) return absl::nullopt;
      }
      const double var = of_histogram ? *of_histogram : Variance(t.values);
      if (max_ && var > *max_)
        return absl::StrCat("variance ", Num(var), " > max_threshold ", Num(*max_));
      if (min_ && var < *min_)
        return absl::StrCat("variance ", Num(var), " < min_threshold ", Num(*min_));
      return "";
    });
  }

 private:
  absl::optional<double> max_, min_;
};

// --- UnchangedTensor ------------------------------------------------------------
// A tensor whose last `num_steps` saved values are each allclose to the one
// before fires. Decision: the series is per (tensor, worker, mode): an EVAL
// pass does not change weights, so interleaving EVAL steps into the TRAIN
// series would make every weight look unchanged. State: the last value of
// each tensor and a count of consecutive unchanged saves.
class UnchangedTensor : public SelectingRule {
 public:
  UnchangedTensor(TensorSelector selector, int64_t num_steps, double rtol, double atol,
                  bool equal_nan)
      : SelectingRule("UnchangedTensor", std::move(selector)),
        num_steps_(num_steps),
        rtol_(rtol),
        atol_(atol),
        equal_nan_(equal_nan) {
    accepts_histograms_ = true;
  }

 protected:
  RuleVerdict Evaluate(const Step& step, const TrialInfo& info) override {
    return CheckSelected(step, info, [&](const Tensor& t) -> absl::optional<std::string> {
      Last& last = last_[std::make_tuple(t.name, t.worker, step.mode)];
      absl::optional<std::string> issue;  // Not evaluated without a previous save.
      // A histogram is compared by its min, max, num, sum and sum_squares.
      TensorValues signature;
      if (t.histogram) signature = HistogramSignature(*t.histogram);
      const TensorValues& values = t.histogram ? signature : t.values;
      if (last.step >= 0) {
        const bool same = last.values.size() == values.size() &&
                          FirstNotClose(values, last.values, rtol_, atol_, equal_nan_) < 0;
        last.unchanged = same ? last.unchanged + 1 : 0;
        if (last.unchanged == 1) last.first_step = last.step;
        if (last.unchanged + 1 >= num_steps_) {
          return absl::StrCat("is unchanged (allclose rtol ", Num(rtol_), ", atol ", Num(atol_),
                              ") over the last ", last.unchanged + 1, " saved ",
                              ModeName(step.mode), " steps since step ", last.first_step,
                              " (num_steps ", num_steps_, ")");
        }
        issue = "";
      }
      last.step = step.global_step;
      values.CopyTo(&last.values);  // Owned: a view would keep its whole buffer.
      return issue;
    });
  }

  std::string MissingData(const TrialInfo& info) const override {
    const std::string why = WhyUnusedSelection(info);
    if (!why.empty()) return why;
    return absl::StrCat("no tensor matching ", selector_.Describe(),
                        " was saved at two steps of one mode (a tensor is compared with its "
                        "previous save in the same mode): ",
                        seen_.NamesWere(), " saved at ", seen_.steps().Describe());
  }

 private:
  struct Last {
    int64_t step = -1;
    int64_t first_step = -1;
    int64_t unchanged = 0;
    std::vector<double> values;
  };
  int64_t num_steps_;
  double rtol_, atol_;
  bool equal_nan_;
  std::map<std::tuple<std::string, std::string, Mode>, Last> last_;
};

// --- AllZero --------------------------------------------------------------------
// A selected tensor with at least `threshold` percent zero values fires.
// Decision: the doc requires collection_names or tensor_regex, yet the
// fixtures expect the rule to run with its defaults; with neither, every
// saved tensor is inspected (the doc's "If no patterns are passed, the rule
// compares all tensors").
class AllZero : public SelectingRule {
 public:
  AllZero(TensorSelector selector, double threshold)
      : SelectingRule("AllZero", std::move(selector)), threshold_(threshold) {
    accepts_histograms_ = true;
  }

 protected:
  RuleVerdict Evaluate(const Step& step, const TrialInfo& info) override {
    return CheckSelected(step, info, [this](const Tensor& t) -> absl::optional<std::string> {
      if (t.histogram) return CheckHistogram(*t.histogram);
      const int64_t zeros = CountZeros(t);
      const double pct = 100.0 * static_cast<double>(zeros) / static_cast<double>(t.values.size());
      if (pct >= threshold_) {
        return absl::StrCat("has ", zeros, " of ", t.values.size(), " values zero (", Num(pct),
                            "%) >= threshold ", Num(threshold_), "%");
      }
      return "";
    });
  }

 private:
  // A histogram settles the share of zeros when every value is 0 (or none
  // can be); otherwise the bucket holding 0 bounds it: below the threshold
  // it is fine, else it cannot be judged (not evaluated).
  absl::optional<std::string> CheckHistogram(const HistogramStats& h) const {
    absl::optional<ZeroShare> zeros = HistogramZeroShare(h);
    if (!zeros) return absl::nullopt;
    const double pct = 100.0 * zeros->share;
    if (zeros->exact && pct >= threshold_) {
      return absl::StrCat("has all of its ", Num(h.num), " values zero (its histogram: min ",
                          Num(h.min), ", max ", Num(h.max), ", sum of squares ",
                          Num(h.sum_squares), ") >= threshold ", Num(threshold_), "%");
    }
    if (pct < threshold_) return "";
    return absl::nullopt;
  }

  double threshold_;
};

// --- SimilarAcrossRuns ----------------------------------------------------------
// Each selected tensor at each step is compared with the same tensor at the
// same global step of the trial `other_trials`, read through
// RuleContext::other_trial: a different shape or values that are not
// numpy.allclose (default tolerances) fire. Tensors the other trial lacks
// are skipped; none compared at all -> kError. Only the first worker's copy
// of a tensor is compared (the lookup names no worker).
class SimilarAcrossRuns : public SelectingRule {
 public:
  SimilarAcrossRuns(std::string other, TensorSelector selector, OtherTrialLookup lookup)
      : SelectingRule("SimilarAcrossRuns", std::move(selector)),
        other_(std::move(other)),
        lookup_(std::move(lookup)) {}

 protected:
  RuleVerdict Evaluate(const Step& step, const TrialInfo& info) override {
    bool any = false;
    const std::string* previous_name = nullptr;
    for (const Tensor& t : step.tensors) {
      if (previous_name != nullptr && *previous_name == t.name) continue;
      previous_name = &t.name;
      if (!Wants(t.name, info)) continue;
      seen_.Note(step, t);
      if (t.values.empty()) continue;
      absl::StatusOr<Tensor> other = lookup_(other_, step.global_step, t.name);
      if (absl::IsNotFound(other.status())) {
        if (missing_names_.size() < kMaxListedNames &&
            std::find(missing_names_.begin(), missing_names_.end(), t.name) ==
                missing_names_.end()) {
          missing_names_.push_back(t.name);
        }
        ++missing_;
        continue;
      }
      if (!other.ok()) {
        return RuleVerdict::Error(
            Clip(absl::StrCat("reading ", t.name, " at step ", step.global_step,
                              " of other trial '", other_, "': ", other.status().ToString())));
      }
      any = true;
      ++evaluations_;
      if (other->values.size() != t.values.size()) {
        return RuleVerdict::Issues(Clip(
            absl::StrCat(StepLabel(step), ": ", TensorLabel(t, info), " has ", t.values.size(),
                         " values here and ", other->values.size(), " in trial '", other_, "'")));
      }
      const int64_t i = FirstNotClose(t.values, other->values, 1e-5, 1e-8, false);
      if (i >= 0) {
        return RuleVerdict::Issues(
            Clip(absl::StrCat(StepLabel(step), ": ", TensorLabel(t, info), " element ", i, " is ",
                              Num(t.values[i]), " here and ", Num(other->values[i]), " in trial '",
                              other_, "' (not allclose: rtol 1e-05, atol 1e-08)")));
      }
    }
    if (any) ++steps_evaluated_;
    return RuleVerdict::Continue();
  }

  std::string MissingData(const TrialInfo& info) const override {
    const std::string why = WhyUnusedSelection(info);
    if (!why.empty()) return why;
    return absl::StrCat("no tensor matching ", selector_.Describe(),
                        " was found in both this trial and '", other_, "' (", missing_,
                        " tensors missing from the other trial at the same global step: ",
                        ListNames(missing_names_, missing_names_.size()),
                        missing_names_.size() == kMaxListedNames ? " and maybe more" : "", ")");
  }

 private:
  std::string other_;
  OtherTrialLookup lookup_;
  int64_t missing_ = 0;                     // Tensor saves the other trial lacks.
  std::vector<std::string> missing_names_;  // The first of them.
};

}  // namespace

absl::StatusOr<std::unique_ptr<Rule>> MakeTensorVariance(RuleParameterReader& p,
                                                         const RuleContext&) {
  TensorSelector selector = TensorSelector::FromParameters(p);
  const absl::optional<double> max = p.OptionalFloat("max_threshold");
  const absl::optional<double> min = p.OptionalFloat("min_threshold");
  RequireSelection(p, selector);
  if (p.status().ok() && !max && !min) {
    p.Fail("max_threshold", "or 'min_threshold' must be given");
  }
  if (p.status().ok() && max && min && *min > *max) {
    p.Fail("min_threshold", absl::StrCat("must not exceed max_threshold (", Num(*max), ")"));
  }
  if (absl::Status s = p.status(); !s.ok()) return s;
  return std::make_unique<TensorVariance>(std::move(selector), max, min);
}

absl::StatusOr<std::unique_ptr<Rule>> MakeUnchangedTensor(RuleParameterReader& p,
                                                          const RuleContext&) {
  TensorSelector selector = TensorSelector::FromParameters(p);
  const int64_t num_steps = p.Int("num_steps", 3, 2);
  const double rtol = p.Float("rtol", 1e-05, 0);
  const double atol = p.Float("atol", 1e-08, 0);
  const bool equal_nan = p.Bool("equal_nan", false);
  RequireSelection(p, selector);
  if (absl::Status s = p.status(); !s.ok()) return s;
  return std::make_unique<UnchangedTensor>(std::move(selector), num_steps, rtol, atol, equal_nan);
}

absl::StatusOr<std::unique_ptr<Rule>> MakeAllZero(RuleParameterReader& p, const RuleContext&) {
  TensorSelector selector = TensorSelector::FromParameters(p, {.all_when_empty = true});
  const double threshold = p.Float("threshold", 100, 0, 100);
  if (absl::Status s = p.status(); !s.ok()) return s;
  return std::make_unique<AllZero>(std::move(selector), threshold);
}

absl::StatusOr<std::unique_ptr<Rule>> MakeSimilarAcrossRuns(RuleParameterReader& p,
                                                            const RuleContext& ctx) {
  const absl::optional<std::string> other = p.OptionalString("other_trials");
  TensorSelector selector = TensorSelector::FromParameters(p, {.all_when_empty = true});
  if (p.status().ok() && (!other || other->empty())) {
    p.Fail("other_trials", "is required: the training job whose tensors to compare with");
  }
  if (absl::Status s = p.status(); !s.ok()) return s;
  if (!ctx.other_trial) {
    return absl::UnimplementedError(
        "SimilarAcrossRuns needs access to the other trial: create it with a RuleContext whose "
        "other_trial lookup reads '" +
        *other + "'");
  }
  return std::make_unique<SimilarAcrossRuns>(*other, std::move(selector), ctx.other_trial);
}

}  // namespace debugplane::rules_engine::internal
