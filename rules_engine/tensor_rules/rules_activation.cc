// Activation rules: DeadRelu, SaturatedActivation.

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "rules_engine/tensor_rules/rule_internal.h"

namespace debugplane::rules_engine::internal {
namespace {

// For each unit (the elements of one sample: shape[1:], shape[0] being the
// batch), the percentage of samples in which `active` holds; returns the
// percentage of units whose activity is below `threshold_inactivity`.
// `counts` is scratch (kept by the rule to reuse its allocation): the
// samples are read row by row, in memory order.
template <typename Active>
double PercentInactiveUnits(const Tensor& t, double threshold_inactivity, Active active,
                            int64_t* units_out, std::vector<int64_t>* counts) {
  const BatchView view = ViewAsBatch(t);
  *units_out = view.units;
  if (view.units == 0) return 0;
  counts->assign(static_cast<size_t>(view.units), 0);
  int64_t* n = counts->data();
  t.values.Visit([&](const auto& values) {
    size_t i = 0;
    for (int64_t b = 0; b < view.batch; ++b) {
      for (int64_t u = 0; u < view.units; ++u, ++i) n[u] += active(values[i]) ? 1 : 0;
    }
  });
  int64_t inactive = 0;
  for (int64_t u = 0; u < view.units; ++u) {
    const double activity = 100.0 * static_cast<double>(n[u]) / static_cast<double>(view.batch);
    if (activity < threshold_inactivity) ++inactive;
  }
  return 100.0 * static_cast<double>(inactive) / static_cast<double>(view.units);
}

// --- DeadRelu -------------------------------------------------------------------
// At each step, for each ReLU output tensor: a unit is dead when it is > 0 in
// fewer than threshold_inactivity percent of the batch's samples; more than
// threshold_layer percent dead units in the tensor (layer) fires.
// Decision: the default tensor_regex ".*relu_output" does not match the
// names smdebug's PyTorch hook gives ReLU module outputs ("relu1_output_0"),
// so with tensor_regex unset the rule also inspects the tensors of the
// 'relu_output' collection, which is the collection a user must save
// (include_regex ".*relu[0-9]*_output_0" or similar). An explicit
// tensor_regex is used alone.
class DeadRelu : public SelectingRule {
 public:
  DeadRelu(TensorSelector selector, double threshold_inactivity, double threshold_layer)
      : SelectingRule("DeadRelu", std::move(selector)),
        threshold_inactivity_(threshold_inactivity),
        threshold_layer_(threshold_layer) {}

 protected:
  RuleVerdict Evaluate(const Step& step, const TrialInfo& info) override {
    return CheckSelected(step, info, [this](const Tensor& t) -> absl::optional<std::string> {
      int64_t units = 0;
      const double dead = PercentInactiveUnits(
          t, threshold_inactivity_, [](double v) { return v > 0; }, &units, &counts_);
      if (dead > threshold_layer_) {
        return absl::StrCat(Num(dead), "% of ", units, " ReLUs are dead (active in < ",
                            Num(threshold_inactivity_), "% of samples) > threshold_layer ",
                            Num(threshold_layer_), "%");
      }
      return "";
    });
  }

  // Every ReLU output with values is evaluated: only the selection explains.
  std::string MissingData(const TrialInfo& info) const override {
    return WhyUnusedSelection(info, "ReLU output tensor");
  }

 private:
  double threshold_inactivity_, threshold_layer_;
  std::vector<int64_t> counts_;  // PercentInactiveUnits' scratch.
};

// --- SaturatedActivation --------------------------------------------------------
// For each activation input tensor (tensor_regex, default
// ".*tanh_input|.*sigmoid_input", and collection_names): a unit is saturated
// when its input lies inside (min, max) for fewer than threshold_inactivity
// percent of the samples; more than threshold_layer percent saturated units
// fires. Decision: the activation is told by the tensor name ("tanh" or
// "sigmoid", case-insensitive); a matched tensor naming neither is skipped.
class SaturatedActivation : public SelectingRule {
 public:
  struct Thresholds {
    double tanh_min, tanh_max, sigmoid_min, sigmoid_max, inactivity, layer;
  };
  SaturatedActivation(TensorSelector selector, Thresholds th)
      : SelectingRule("SaturatedActivation", std::move(selector)), th_(th) {}

 protected:
  RuleVerdict Evaluate(const Step& step, const TrialInfo& info) override {
    return CheckSelected(step, info, [this](const Tensor& t) -> absl::optional<std::string> {
      const std::string lower = absl::AsciiStrToLower(t.name);
      double lo, hi;
      const char* kind;
      if (absl::StrContains(lower, "tanh")) {
        lo = th_.tanh_min, hi = th_.tanh_max, kind = "tanh";
      } else if (absl::StrContains(lower, "sigmoid")) {
        lo = th_.sigmoid_min, hi = th_.sigmoid_max, kind = "sigmoid";
      } else {
        if (skipped_names_.size() < kMaxListedNames &&
            std::find(skipped_names_.begin(), skipped_names_.end(), t.name) ==
                skipped_names_.end()) {
          skipped_names_.push_back(t.name);
        }
        ++skipped_;
        return absl::nullopt;
      }
      int64_t units = 0;
      const double saturated = PercentInactiveUnits(
          t, th_.inactivity, [lo, hi](double v) { return v > lo && v < hi; }, &units, &counts_);
      if (saturated > th_.layer) {
        return absl::StrCat(Num(saturated), "% of ", units, " ", kind,
                            " units are saturated (input outside (", Num(lo), ", ", Num(hi),
                            ") in > ", Num(100 - th_.inactivity),
                            "% of samples) > threshold_layer ", Num(th_.layer), "%");
      }
      return "";
    });
  }

  std::string MissingData(const TrialInfo& info) const override {
    const std::string why = WhyUnusedSelection(info, "tanh or sigmoid input tensor");
    if (!why.empty()) return why;
    return absl::StrCat("no tanh or sigmoid input tensor was saved (", selector_.Describe(),
                        "): the matching tensors were skipped (", Times(skipped_),
                        ") because their names say neither tanh nor sigmoid (the "
                        "activation is told by the name): ",
                        ListNames(skipped_names_, skipped_names_.size()),
                        skipped_names_.size() == kMaxListedNames ? " and maybe more" : "");
  }

 private:
  Thresholds th_;
  std::vector<int64_t> counts_;             // PercentInactiveUnits' scratch.
  int64_t skipped_ = 0;                     // Matched tensors naming neither activation.
  std::vector<std::string> skipped_names_;  // The first of them.
};

}  // namespace

absl::StatusOr<std::unique_ptr<Rule>> MakeDeadRelu(RuleParameterReader& p, const RuleContext&) {
  const bool explicit_regex = p.Has("tensor_regex");
  TensorSelector selector = TensorSelector::FromParameters(
      p, {.collection_names = false, .default_regex = {".*relu_output"}});
  if (!explicit_regex) selector.collections = {"relu_output"};
  const double inactivity = p.Float("threshold_inactivity", 1.0, 0, 100);
  const double layer = p.Float("threshold_layer", 50.0, 0, 100);
  if (absl::Status s = p.status(); !s.ok()) return s;
  return std::make_unique<DeadRelu>(std::move(selector), inactivity, layer);
}

absl::StatusOr<std::unique_ptr<Rule>> MakeSaturatedActivation(RuleParameterReader& p,
                                                              const RuleContext&) {
  TensorSelector selector =
      TensorSelector::FromParameters(p, {.default_regex = {".*tanh_input|.*sigmoid_input"}});
  SaturatedActivation::Thresholds th;
  th.tanh_min = p.Float("threshold_tanh_min", -9.4999);
  th.tanh_max = p.Float("threshold_tanh_max", 9.4999);
  th.sigmoid_min = p.Float("threshold_sigmoid_min", -23);
  th.sigmoid_max = p.Float("threshold_sigmoid_max", 16.99999);
  th.inactivity = p.Float("threshold_inactivity", 1.0, 0, 100);
  th.layer = p.Float("threshold_layer", 50.0, 0, 100);
  if (p.status().ok() && th.tanh_min >= th.tanh_max) {
    p.Fail("threshold_tanh_min", "must be less than threshold_tanh_max");
  }
  if (p.status().ok() && th.sigmoid_min >= th.sigmoid_max) {
    p.Fail("threshold_sigmoid_min", "must be less than threshold_sigmoid_max");
  }
  if (absl::Status s = p.status(); !s.ok()) return s;
  return std::make_unique<SaturatedActivation>(std::move(selector), th);
}

}  // namespace debugplane::rules_engine::internal
