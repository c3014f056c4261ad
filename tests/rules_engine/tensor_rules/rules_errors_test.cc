// A rule that ends in Error for missing data says what was there instead and
// why it did not count (rule_internal.h: WhyUnused, DescribeTrial), bounded.

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rules_engine/catalog/builtin_rules.h"
#include "rules_engine/tensor_rules/rule_internal.h"
#include "tests/rules_engine/tensor_rules/rules_test_util.h"

namespace debugplane::rules_engine {
namespace {

using ::testing::AllOf;
using testing::Feed;
using ::testing::HasSubstr;
using testing::Make;
using ::testing::Not;
using testing::PyTorchInfo;
using testing::S;
using testing::T;
using Kind = RuleVerdict::Kind;

const char kLoss[] = "CrossEntropyLoss_output_0";

// A trial whose collections file lists what it saved, as smdebug's does:
// the loss and 16 weights (17 tensors), and no 'labels' collection.
TrialInfo SeventeenTensors() {
  TrialInfo info = PyTorchInfo();
  info.collections.erase("labels");
  info.collections.erase("predictions");
  info.collections["losses"].tensor_names = {kLoss};
  for (int i = 0; i < 16; ++i) {
    info.collections["weights"].tensor_names.push_back(absl::StrCat("fc", i, ".weight"));
  }
  return info;
}

TEST(RuleErrorsTest, NoMatchListsTheTrialsTensorsAndTheMissingCollection) {
  const TrialInfo info = SeventeenTensors();
  RuleVerdict v =
      Feed(*Make("ClassImbalance"), {S(0, {T(kLoss, {0.5})}), S(1, {T(kLoss, {0.4})})}, info);
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(
      v.details,
      AllOf(HasSubstr("no labels tensor was saved (labels_regex '.*labels'); the trial has 17 "
                      "tensors (by its collections file): 'CrossEntropyLoss_output_0', "
                      "'fc0.weight', 'fc1.weight', 'fc10.weight'"),
            // At most 10 names, then how many more.
            HasSubstr("'fc14.weight', 'fc15.weight', 'fc2.weight' and 7 more"),
            Not(HasSubstr("'fc3.weight'")),
            HasSubstr("(collection 'labels' is not saved by the hook)"),
            HasSubstr("read 2 TRAIN steps; collections saved (tensor count): biases (0), "
                      "gradients (0), losses (1), relu_output (0), weights (16)")));
  EXPECT_LE(v.details.size(), 1024u);
}

TEST(RuleErrorsTest, NamesFromTheTrialAreEscapedAndCut) {
  // Tensor and collection names come from files: one line, at most 40
  // characters each, quotes escaped.
  TrialInfo info;
  const std::string odd = "evil'\nname_" + std::string(100, 'x');
  info.collections[odd].name = odd;
  info.collections[odd].tensor_names = {odd};
  RuleVerdict v = Feed(*Make("TreeDepth"), {S(0, {T("unrelated", {1})})}, info);
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, AllOf(HasSubstr("'evil\\'\\nname_xxx"), HasSubstr("x...'"),
                               Not(HasSubstr("\n")), Not(HasSubstr(std::string(40, 'x')))));
  EXPECT_LE(v.details.size(), 1024u);
}

TEST(RuleErrorsTest, DataAtStepsOfAnotherModeIsNamedWithTheStepCounts) {
  // Labels saved, but only at EVAL steps: ClassImbalance reads TRAIN/GLOBAL.
  std::vector<Step> eval;
  for (int i = 0; i < 12; ++i) {
    eval.push_back(S(i, {T("labels", {0, 1}), T("predictions", {0, 1})}, Mode::kEval, i));
  }
  RuleVerdict v = Feed(*Make("ClassImbalance"), eval);
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details,
              AllOf(HasSubstr("no labels tensor (labels_regex '.*labels') at a TRAIN/GLOBAL "
                              "step, the steps the rule reads: 'labels' was saved at 12 EVAL "
                              "steps only; the trial has 12 EVAL steps and 0 TRAIN/GLOBAL steps"),
                    Not(HasSubstr("was saved;"))));

  // Weights only at EVAL steps: no update to measure.
  v = Feed(*Make("WeightUpdateRatio"), {S(0, {T("fc1.weight", {1})}, Mode::kEval, 0),
                                        S(1, {T("fc1.weight", {1})}, Mode::kEval, 1)});
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, HasSubstr("no weight tensor (collection 'weights') at a TRAIN/GLOBAL "
                                   "step, the steps the rule reads: 'fc1.weight' was saved at 2 "
                                   "EVAL steps only"));

  // An explicit mode: losses of another one.
  std::vector<Step> eval_losses;
  for (int i = 0; i < 12; ++i) eval_losses.push_back(S(i, {T(kLoss, {0.5})}, Mode::kEval, i));
  v = Feed(*Make("LossNotDecreasing", {{"mode", "TRAIN"}}), eval_losses);
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, HasSubstr("no loss at a TRAIN step (mode 'TRAIN' compares only TRAIN "
                                   "steps): 'CrossEntropyLoss_output_0' was saved at 12 EVAL "
                                   "steps only"));

  // PoorWeightInitialization analyses the first training steps only.
  v = Feed(*Make("PoorWeightInitialization"), {S(0, {T("gradient/a", {1, 2})}, Mode::kEval, 0),
                                               S(1, {T("gradient/a", {1, 2})}, Mode::kEval, 1)});
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, HasSubstr("no TRAIN/GLOBAL step: the rule analyses the first 10 training "
                                   "steps and the trial has 2 EVAL steps and 0 TRAIN/GLOBAL "
                                   "steps"));
  v = Feed(*Make("PoorWeightInitialization"),
           {S(0, {T("CrossEntropyLoss_output_0", {1})}, Mode::kEval, 0),
            S(1, {T("relu1_relu_input", {1, 2})}), S(2, {T("relu1_relu_input", {1, 2})})});
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details,
              AllOf(HasSubstr("instead: one activation input layer only, at 2 steps: the "
                              "variance ratio needs two"),
                    HasSubstr("loss 'CrossEntropyLoss_output_0' was saved at 1 EVAL step, which "
                              "are not analysed")));
}

TEST(RuleErrorsTest, OverfitNamesTheStepsItFound) {
  // GLOBAL steps train; without EVAL steps there is no validation loss.
  std::vector<Step> global;
  for (int i = 0; i < 10; ++i) global.push_back(S(i, {T(kLoss, {0.5})}, Mode::kGlobal, i));
  RuleVerdict v = Feed(*Make("Overfit"), global);
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, HasSubstr("found 0 TRAIN and 0 EVAL steps with a loss, and 10 GLOBAL "
                                   "steps"));
  // Losses before start_step, and EVAL passes with no training before them.
  std::vector<Step> steps = {S(0, {T(kLoss, {0.5})}), S(1, {T(kLoss, {0.9})}, Mode::kEval, 0),
                             S(5, {T(kLoss, {0.9})}, Mode::kEval, 1)};
  v = Feed(*Make("Overfit", {{"start_step", "2"}}), steps);
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, AllOf(HasSubstr("2 steps with a loss came before start_step (2)"),
                               HasSubstr("1 EVAL passes had no training step with a loss")));
}

TEST(RuleErrorsTest, DataThatWasThereButUnusableSaysWhy) {
  // Without values.
  Tensor empty = T("x", {}, {0});
  RuleVerdict v = Feed(*Make("ExplodingTensor", {{"tensor_regex", "x"}}), {S(0, {empty})});
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, HasSubstr("every tensor (tensor_regex 'x') was saved without values "
                                   "(once: a string dtype or an empty shape): 'x'"));
  // Labels whose values are not class ids.
  v = Feed(*Make("ClassImbalance"), {S(0, {T("labels", {NAN, 1})}), S(1, {T("labels", {NAN})})});
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, HasSubstr("'labels' was saved, but never with class ids for values (NaN, "
                                   "infinite or beyond 1e9, 2 times)"));
  // Matching tensors SaturatedActivation cannot tell the activation of.
  v = Feed(*Make("SaturatedActivation", {{"tensor_regex", ".*_input"}}),
           {S(0, {T("layer_relu_input", {1, 2})})});
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, HasSubstr("the matching tensors were skipped (once) because their names "
                                   "say neither tanh nor sigmoid (the activation is told by the "
                                   "name): 'layer_relu_input'"));
  // A single save per mode cannot be compared.
  v = Feed(*Make("UnchangedTensor", {{"tensor_regex", "x"}}),
           {S(0, {T("x", {1})}), S(1, {T("x", {1})}, Mode::kEval, 0)});
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, HasSubstr("'x' was saved at 1 TRAIN step and 1 EVAL step"));
  // Weights saved once.
  v = Feed(*Make("WeightUpdateRatio"), {S(0, {T("fc1.weight", {1})})});
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details,
              HasSubstr("'fc1.weight' was saved at 1 TRAIN/GLOBAL step only: an update ratio "
                        "needs two"));
  // Images without a channel axis.
  v = Feed(*Make("CheckInputImages"), {S(0, {T("hybridsequential0_input_0", {1, 2, 3, 4})})});
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, HasSubstr("'hybridsequential0_input_0' has shape [4], without a channel "
                                   "axis 1 after the batch axis (parameter 'channel')"));
  // Labels and predictions of different sizes.
  v = Feed(*Make("Confusion"), {S(0, {T("labels", {0, 1}), T("predictions", {0, 1, 1})})});
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, HasSubstr("1 steps had labels and predictions with different sample "
                                   "counts (last: 'labels' 2 vs 'predictions' 3 at step 0"));
  // Trees without a node id.
  v = Feed(*Make("TreeDepth"), {S(0, {T("trees/Node", {NAN})})});
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, HasSubstr("'trees/Node' was saved without a node id (no finite value >= "
                                   "0, once)"));
  // Feature importances that sum to 0.
  std::vector<Tensor> zeros;
  for (int f = 0; f < 5; ++f)
    zeros.push_back(T(absl::StrCat("feature_importance/weight/f", f), {0}));
  v = Feed(*Make("FeatureImportanceOverweight"), {S(0, zeros)});
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, HasSubstr("the feature importances summed to 0 at all 1 steps"));
}

TEST(RuleErrorsTest, SimilarAcrossRunsNamesTheTensorsTheOtherTrialLacks) {
  RuleContext ctx;
  ctx.other_trial = [](const std::string&, int64_t, const std::string&) -> absl::StatusOr<Tensor> {
    return absl::NotFoundError("none");
  };
  auto rule = CreateBuiltinRule("SimilarAcrossRuns", {{"other_trials", "job-2"}}, ctx);
  ASSERT_TRUE(rule.ok()) << rule.status();
  RuleVerdict v = Feed(**rule, {S(7, {T("z", {1}), T("y", {2})}), S(8, {T("z", {1})})});
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, HasSubstr("(3 tensors missing from the other trial at the same global "
                                   "step: 'y', 'z')"));
}

// Every rule that ends in Error for want of data names the tensor that was
// there, the steps it read and, where it reads a collection, that the hook
// does not save it.
struct NoDataCase {
  std::string rule;
  RuleParameters params;
  std::string why;
};

class RuleErrorsNoDataTest : public ::testing::TestWithParam<NoDataCase> {};

TEST_P(RuleErrorsNoDataTest, SaysWhatWasThereInstead) {
  const NoDataCase& c = GetParam();
  TrialInfo info;  // A collections file listing the one tensor saved.
  info.collections["default"].name = "default";
  info.collections["default"].tensor_names = {"unrelated_tensor"};
  RuleContext ctx;
  ctx.other_trial = [](const std::string&, int64_t, const std::string&) -> absl::StatusOr<Tensor> {
    return absl::NotFoundError("none");
  };
  absl::StatusOr<std::unique_ptr<Rule>> rule = CreateBuiltinRule(c.rule, c.params, ctx);
  ASSERT_TRUE(rule.ok()) << rule.status();
  std::vector<Step> steps;
  for (int i = 0; i < 3; ++i) steps.push_back(S(i, {T("unrelated_tensor", {1, 2})}));
  RuleVerdict v = Feed(**rule, steps, info);
  EXPECT_EQ(v.kind, Kind::kError) << v.details;
  EXPECT_THAT(
      v.details,
      AllOf(HasSubstr(c.why),
            HasSubstr("the trial has 1 tensor (by its collections file): "
                      "'unrelated_tensor'"),
            HasSubstr("read 3 TRAIN steps; collections saved (tensor count): default (1)")));
  EXPECT_LE(v.details.size(), 1024u);
}

std::string NoDataName(const ::testing::TestParamInfo<NoDataCase>& info) { return info.param.rule; }

const std::vector<NoDataCase>& NoDataCases() {
  static const auto* cases = new std::vector<NoDataCase>{
      NoDataCase{"VanishingGradient",
                 {},
                 "no tensor of collection 'gradients' was saved (tensor_regex 'gradient/' or "
                 "collection 'gradients')"},
      NoDataCase{"ExplodingTensor",
                 {{"tensor_regex", "nomatch"}},
                 "no tensor was saved (tensor_regex 'nomatch')"},
      NoDataCase{"WeightUpdateRatio",
                 {},
                 "no weight tensor was saved (collection 'weights'); the trial has 1 tensor (by "
                 "its collections file): 'unrelated_tensor' (collection 'weights' is not saved "
                 "by the hook)"},
      NoDataCase{"PoorWeightInitialization",
                 {},
                 "in the first 10 TRAIN/GLOBAL steps no activation input (tensor_regex "
                 "'.*relu_input') in two layers, gradient (collection 'gradients') or loss "
                 "(collection 'losses') was saved"},
      NoDataCase{"LossNotDecreasing", {}, "no loss tensor was saved (collection 'losses')"},
      NoDataCase{"Overfit", {}, "no loss tensor was saved (collection 'losses')"},
      NoDataCase{"Overtraining", {}, "no loss tensor was saved (collection 'losses')"},
      NoDataCase{"DeadRelu",
                 {},
                 "no ReLU output tensor was saved (tensor_regex '.*relu_output' or collection "
                 "'relu_output')"},
      NoDataCase{"SaturatedActivation",
                 {},
                 "no tanh or sigmoid input tensor was saved (tensor_regex "
                 "'.*tanh_input|.*sigmoid_input')"},
      NoDataCase{"TensorVariance",
                 {{"collection_names", "weights"}, {"max_threshold", "1"}},
                 "(collection 'weights' is not saved by the hook)"},
      NoDataCase{"UnchangedTensor",
                 {{"collection_names", "weights"}},
                 "no tensor was saved (collection 'weights')"},
      NoDataCase{
          "AllZero", {{"tensor_regex", "nomatch"}}, "no tensor was saved (tensor_regex 'nomatch')"},
      NoDataCase{"SimilarAcrossRuns",
                 {{"other_trials", "job-2"}, {"tensor_regex", "nomatch"}},
                 "no tensor was saved (tensor_regex 'nomatch')"},
      NoDataCase{"ClassImbalance",
                 {},
                 "no labels tensor was saved (labels_regex '.*labels'); the trial has 1 tensor "
                 "(by its collections file): 'unrelated_tensor' (collection 'labels' is not "
                 "saved by the hook)"},
      NoDataCase{"CheckInputImages",
                 {},
                 "no input image tensor was saved (tensor_regex "
                 "'.*hybridsequential0_input_0')"},
      NoDataCase{"NLPSequenceRatio",
                 {},
                 "no input sequence tensor was saved (tensor_regex '.*embedding0_input_0')"},
      NoDataCase{"Confusion",
                 {},
                 "no labels tensor was saved (tensor 'labels' or collection 'labels'); the "
                 "trial has 1 tensor (by its collections file): 'unrelated_tensor' "
                 "(collection 'labels' is not saved by the hook)"},
      NoDataCase{"FeatureImportanceOverweight",
                 {},
                 "no feature importance tensor was saved (tensor_regex "
                 "'.*feature_importance/weight'); the trial has 1 tensor (by its collections "
                 "file): 'unrelated_tensor' (collection 'feature_importance' is not saved by "
                 "the hook)"},
      NoDataCase{"TreeDepth",
                 {},
                 "no 'trees/Node' tensor was saved; the trial has 1 tensor (by its collections "
                 "file): 'unrelated_tensor' (collection 'trees' is not saved by the hook)"}};
  return *cases;
}

INSTANTIATE_TEST_SUITE_P(EveryEvaluatingRule, RuleErrorsNoDataTest,
                         ::testing::ValuesIn(NoDataCases()), NoDataName);

TEST(RuleErrorsNoDataTableTest, CoversEveryRuleThatNeedsData) {
  std::set<std::string> covered = {
      "StalledTrainingRule",  // Needs steps, not tensors.
      // Names each missing collection and the CollectionConfigurations entry
      // to add instead (XgboostReportTest's missing-collection case).
      "CreateXgboostReport"};
  for (const NoDataCase& c : NoDataCases()) covered.insert(c.rule);
  const std::vector<std::string> names = BuiltinTensorRuleNames();
  EXPECT_EQ(covered, std::set<std::string>(names.begin(), names.end()));
}

}  // namespace
}  // namespace debugplane::rules_engine
