// XGBoost rules: FeatureImportanceOverweight, TreeDepth.

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rules_engine/tensor_rules/rule_internal.h"

namespace debugplane::rules_engine::internal {
namespace {

// --- FeatureImportanceOverweight ------------------------------------------------
// smdebug's XGBoost hook saves one scalar per feature, e.g.
// "feature_importance/weight/f3". At each step the values of all tensors
// matching tensor_regex (first worker's) are the importances; the sum of the
// `nfeatures` largest over the total above `threshold` fires. Decision: a
// step with nfeatures or fewer features is skipped (the top n would trivially
// hold 100%); kError at the end if no step had more.
class FeatureImportanceOverweight : public SelectingRule {
 public:
  FeatureImportanceOverweight(double threshold, int64_t nfeatures, TensorSelector selector)
      : SelectingRule("FeatureImportanceOverweight", std::move(selector)),
        threshold_(threshold),
        nfeatures_(nfeatures) {}

  std::vector<std::string> RequiredCollections() const override { return {"feature_importance"}; }

 protected:
  RuleVerdict Evaluate(const Step& step, const TrialInfo& info) override {
    std::vector<double> importances;
    const std::string* previous_name = nullptr;
    for (const Tensor& t : step.tensors) {
      if (previous_name != nullptr && *previous_name == t.name) continue;  // Other workers.
      previous_name = &t.name;
      if (!Wants(t.name, info)) continue;
      seen_.Note(step, t);
      if (t.values.empty()) continue;
      for (double v : t.values) {
        if (std::isfinite(v)) importances.push_back(std::fabs(v));
      }
    }
    if (importances.empty()) return RuleVerdict::Continue();
    most_features_ = std::max<int64_t>(most_features_, importances.size());
    if (static_cast<int64_t>(importances.size()) <= nfeatures_) return RuleVerdict::Continue();
    std::sort(importances.begin(), importances.end(), std::greater<double>());
    double total = 0, top = 0;
    for (size_t i = 0; i < importances.size(); ++i) {
      total += importances[i];
      if (static_cast<int64_t>(i) < nfeatures_) top += importances[i];
    }
    if (total <= 0) {
      ++all_zero_steps_;
      return RuleVerdict::Continue();
    }
    ++evaluations_;
    ++steps_evaluated_;
    const double share = top / total;
    if (share > threshold_) {
      return RuleVerdict::Issues(
          Clip(absl::StrCat(StepLabel(step), ": the ", nfeatures_, " largest of ",
                            importances.size(), " feature importances (", selector_.Describe(),
                            ") hold ", Num(share), " of the total > threshold ", Num(threshold_))));
    }
    return RuleVerdict::Continue();
  }

  std::string MissingData(const TrialInfo& info) const override {
    const std::string why = WhyUnused("feature importance tensor", selector_.Describe(), seen_,
                                      steps_read(), {}, info, {"feature_importance"});
    if (!why.empty()) return why;
    if (most_features_ == 0) {
      return absl::StrCat("the feature importance tensors (", seen_.Names(),
                          ") held no finite value");
    }
    if (most_features_ <= nfeatures_) {
      return absl::StrCat("at most ", most_features_,
                          " feature importances were saved at a step, not more than nfeatures (",
                          nfeatures_, "): the top nfeatures would hold everything");
    }
    return absl::StrCat("the feature importances summed to 0 at all ", all_zero_steps_,
                        " steps with more than nfeatures (", nfeatures_, ") of them");
  }

 private:
  double threshold_;
  int64_t nfeatures_;
  int64_t most_features_ = 0;
  int64_t all_zero_steps_ = 0;  // Steps whose importances were all 0.
};

// --- TreeDepth ------------------------------------------------------------------
// smdebug's XGBoost hook saves the model's trees_to_dataframe() columns as
// "trees/<column>" (collection 'trees'); "trees/Node" holds each node's id,
// numbered breadth-first from 0 in each tree, so node n lies at depth
// floor(log2(n + 1)) and the model's depth is that of its largest node id.
// Decision: the doc explains that XGBoost rejects splits that do not improve
// the loss so "the tree might not grow as deep as defined by the depth
// parameter": the rule fires when the trees' depth is below `depth` (the
// configured max_depth is deeper than the data supports).
class TreeDepth : public SelectingRule {
 public:
  explicit TreeDepth(double depth)
      : SelectingRule("TreeDepth", TensorSelector({}, {"(.*/)?trees/Node$"})), depth_(depth) {}

  std::vector<std::string> RequiredCollections() const override { return {"trees"}; }

 protected:
  RuleVerdict Evaluate(const Step& step, const TrialInfo& info) override {
    for (const Tensor& t : NoteWantedWithValues(step, info)) {
      double max_id = -1;
      for (double v : t.values) {
        if (std::isfinite(v)) max_id = std::max(max_id, v);
      }
      if (max_id < 0) {
        ++no_node_id_;
        continue;
      }
      ++evaluations_;
      ++steps_evaluated_;
      const double depth = std::floor(std::log2(max_id + 1));
      if (depth < depth_) {
        return RuleVerdict::Issues(Clip(
            absl::StrCat(StepLabel(step), ": ", TensorLabel(t, info), " largest node id ",
                         Num(max_id), " gives tree depth ", Num(depth), " < depth ", Num(depth_),
                         " (splits were rejected: the trees do not grow that deep)")));
      }
      break;
    }
    return RuleVerdict::Continue();
  }

  std::string MissingData(const TrialInfo& info) const override {
    const std::string why =
        WhyUnused("'trees/Node' tensor", "", seen_, steps_read(), {}, info, {"trees"});
    if (!why.empty()) return why;
    return absl::StrCat(seen_.NamesWere(), " saved without a node id (no finite value >= 0, ",
                        Times(no_node_id_), ")");
  }

 private:
  double depth_;
  int64_t no_node_id_ = 0;  // 'trees/Node' saves without a usable node id.
};

}  // namespace

absl::StatusOr<std::unique_ptr<Rule>> MakeFeatureImportanceOverweight(RuleParameterReader& p,
                                                                      const RuleContext&) {
  const double threshold = p.Float("threshold", 0.8, 0, 1);
  const int64_t nfeatures = p.Int("nfeatures", 3, 1);
  TensorSelector selector = TensorSelector::FromParameters(
      p, {.collection_names = false, .default_regex = {".*feature_importance/weight"}});
  if (absl::Status s = p.status(); !s.ok()) return s;
  return std::make_unique<FeatureImportanceOverweight>(threshold, nfeatures, std::move(selector));
}

absl::StatusOr<std::unique_ptr<Rule>> MakeTreeDepth(RuleParameterReader& p, const RuleContext&) {
  const double depth = p.Float("depth", 4, 0);
  if (absl::Status s = p.status(); !s.ok()) return s;
  return std::make_unique<TreeDepth>(depth);
}

}  // namespace debugplane::rules_engine::internal
