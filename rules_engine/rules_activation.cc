// Activation rules: DeadRelu, SaturatedActivation.

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "rules_engine/rule_internal.h"

namespace debugplane::rules_engine::internal {
namespace {

// For each unit (the elements of one sample: shape[1:], shape[0] being the
// batch), the percentage of samples in which `active` holds; returns the
// percentage of units whose activity is below `threshold_inactivity`.
template <typename Active>
double PercentInactiveUnits(const Tensor& t, double threshold_inactivity, Active active,
                            int64_t* units_out) {
  const BatchView view = ViewAsBatch(t);
  *units_out = view.units;
  if (view.units == 0) return 0;
  int64_t inactive = 0;
  for (int64_t u = 0; u < view.units; ++u) {
    int64_t n = 0;
    for (int64_t b = 0; b < view.batch; ++b) {
      if (active(t.values[b * view.units + u])) ++n;
    }
    const double activity = 100.0 * static_cast<double>(n) / static_cast<double>(view.batch);
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

  RuleVerdict OnStep(const Step& step, const TrialInfo& info) override {
    return CheckSelected(step, info, [this](const Tensor& t) -> absl::optional<std::string> {
      int64_t units = 0;
      const double dead = PercentInactiveUnits(
          t, threshold_inactivity_, [](double v) { return v > 0; }, &units);
      if (dead > threshold_layer_) {
        return absl::StrCat(Num(dead), "% of ", units, " ReLUs are dead (active in < ",
                            Num(threshold_inactivity_), "% of samples) > threshold_layer ",
                            Num(threshold_layer_), "%");
      }
      return "";
    });
  }

 protected:
  std::string MissingData() const override {
    return absl::StrCat("no ReLU output tensor was saved (", selector_.Describe(), ")");
  }

 private:
  double threshold_inactivity_, threshold_layer_;
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

  RuleVerdict OnStep(const Step& step, const TrialInfo& info) override {
    return CheckSelected(step, info, [this](const Tensor& t) -> absl::optional<std::string> {
      const std::string lower = absl::AsciiStrToLower(t.name);
      double lo, hi;
      const char* kind;
      if (absl::StrContains(lower, "tanh")) {
        lo = th_.tanh_min, hi = th_.tanh_max, kind = "tanh";
      } else if (absl::StrContains(lower, "sigmoid")) {
        lo = th_.sigmoid_min, hi = th_.sigmoid_max, kind = "sigmoid";
      } else {
        ++skipped_;
        return absl::nullopt;
      }
      int64_t units = 0;
      const double saturated = PercentInactiveUnits(
          t, th_.inactivity, [lo, hi](double v) { return v > lo && v < hi; }, &units);
      if (saturated > th_.layer) {
        return absl::StrCat(Num(saturated), "% of ", units, " ", kind,
                            " units are saturated (input outside (", Num(lo), ", ", Num(hi),
                            ") in > ", Num(100 - th_.inactivity),
                            "% of samples) > threshold_layer ", Num(th_.layer), "%");
      }
      return "";
    });
  }

 protected:
  std::string MissingData() const override {
    return absl::StrCat("no tanh or sigmoid input tensor was saved (", selector_.Describe(), ")",
                        skipped_ > 0 ? absl::StrCat("; ", skipped_,
                                                    " matched tensors named neither tanh nor "
                                                    "sigmoid were skipped")
                                     : "");
  }

 private:
  Thresholds th_;
  int64_t skipped_ = 0;
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
