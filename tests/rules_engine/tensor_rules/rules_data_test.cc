// Data, XGBoost and wall-clock rules.

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/rules_engine/tensor_rules/rules_test_util.h"

namespace debugplane::rules_engine {
namespace {

using ::testing::AllOf;
using testing::Feed;
using ::testing::HasSubstr;
using testing::Make;
using testing::S;
using testing::T;
using Kind = RuleVerdict::Kind;

// `n` TRAIN steps of `labels` and `predictions`.
std::vector<Step> LabelSteps(int n, std::vector<double> labels, std::vector<double> predictions,
                             std::vector<int64_t> pred_shape = {}) {
  std::vector<Step> steps;
  for (int i = 0; i < n; ++i) {
    steps.push_back(S(i, {T("labels", labels), T("predictions", predictions, pred_shape)}));
  }
  return steps;
}

TEST(ClassImbalanceTest, ImbalanceFiresAfterSamples) {
  std::vector<double> y(20, 0.0);
  y[0] = 1;  // 19:1
  RuleVerdict v = Feed(*Make("ClassImbalance"), LabelSteps(30, y, y));
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details,
              AllOf(HasSubstr("step 24"), HasSubstr("ratio 19 > threshold_imbalance 10")));
}

TEST(ClassImbalanceTest, MispredictionsAndBalancedData) {
  std::vector<double> y = {0, 1, 0, 1}, wrong = {0, 0, 0, 0};
  RuleVerdict v = Feed(*Make("ClassImbalance", {{"samples", "8"}}), LabelSteps(3, y, wrong));
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details, AllOf(HasSubstr("class 1 mispredicted in 4 of 4"),
                               HasSubstr("threshold_misprediction 0.7")));
  EXPECT_EQ(Feed(*Make("ClassImbalance", {{"samples", "8"}}), LabelSteps(3, y, y)).kind,
            Kind::kNoIssuesFound);
  // Probabilities need argmax.
  std::vector<double> probs = {0.9, 0.1, 0.2, 0.8, 0.9, 0.1, 0.2, 0.8};
  EXPECT_EQ(Feed(*Make("ClassImbalance", {{"samples", "8"}, {"argmax", "True"}}),
                 LabelSteps(3, y, probs, {4, 2}))
                .kind,
            Kind::kNoIssuesFound);
  v = Feed(*Make("ClassImbalance", {{"samples", "100"}}), LabelSteps(3, y, probs, {4, 2}));
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, AllOf(HasSubstr("fewer than samples (100)"), HasSubstr("argmax")));
}

// A tensor matching both labels_regex and predictions_regex is counted as
// labels (it used to be skipped, and the rule then said no labels were saved).
TEST(ClassImbalanceTest, ATensorMatchingBothRegexesCountsAsLabels) {
  // predictions_regex ".*" also matches "labels": the labels, with the
  // predictions tensor that matches predictions_regex alone.
  std::vector<double> y = {0, 1, 0, 1}, wrong = {0, 0, 0, 0};
  RuleVerdict v = Feed(*Make("ClassImbalance", {{"samples", "8"}, {"predictions_regex", ".*"}}),
                       LabelSteps(3, y, wrong));
  EXPECT_EQ(v.kind, Kind::kIssuesFound) << v.details;
  EXPECT_THAT(v.details, HasSubstr("class 1 mispredicted in 4 of 4"));

  // One tensor matching both: its imbalance is judged; its predictions are
  // itself, so mispredictions are not, and the summary says so.
  std::vector<Step> only_labels;
  std::vector<double> imbalanced(20, 0.0);
  imbalanced[0] = 1;
  for (int i = 0; i < 30; ++i) only_labels.push_back(S(i, {T("labels", imbalanced)}));
  const RuleParameters same = {{"labels_regex", ".*labels"}, {"predictions_regex", ".*labels"}};
  v = Feed(*Make("ClassImbalance", same), only_labels);
  EXPECT_EQ(v.kind, Kind::kIssuesFound) << v.details;
  EXPECT_THAT(v.details, HasSubstr("ratio 19 > threshold_imbalance 10"));
  std::vector<Step> balanced;
  for (int i = 0; i < 3; ++i) balanced.push_back(S(i, {T("labels", y)}));
  RuleParameters few = same;
  few["samples"] = "8";
  v = Feed(*Make("ClassImbalance", few), balanced);
  EXPECT_EQ(v.kind, Kind::kNoIssuesFound) << v.details;
  EXPECT_THAT(v.details, HasSubstr("mispredictions were not judged for 'labels': it matches both "
                                   "labels_regex and predictions_regex"));
}

TEST(ClassImbalanceTest, AmbiguousTensorBesideUnambiguousLabelsIsPredictions) {
  // "predicted_labels" matches both regexes; "labels" matches labels_regex
  // alone, so it is the labels and "predicted_labels" its predictions (not
  // more labels: 8 samples are reached at step 1, not step 0).
  std::vector<Step> steps;
  for (int i = 0; i < 3; ++i) {
    steps.push_back(S(i, {T("labels", {0, 1, 0, 1}), T("predicted_labels", {0, 0, 0, 0})}));
  }
  RuleVerdict v = Feed(
      *Make("ClassImbalance",
            {{"samples", "8"}, {"labels_regex", ".*labels"}, {"predictions_regex", "predicted.*"}}),
      steps);
  EXPECT_EQ(v.kind, Kind::kIssuesFound) << v.details;
  EXPECT_THAT(v.details, AllOf(HasSubstr("step 1 (TRAIN step 1)"),
                               HasSubstr("class 1 mispredicted in 4 of 4")));
}

TEST(CheckInputImagesTest, UnnormalizedChannelFires) {
  // [batch 2, channel 2, 1x2]: channel 0 ~ 0, channel 1 ~ 100.
  Tensor img = T("model_hybridsequential0_input_0", {0.1, -0.1, 100, 100, -0.1, 0.1, 100, 100},
                 {2, 2, 1, 2});
  auto rule = Make("CheckInputImages", {{"threshold_samples", "4"}, {"regex", ".*input_0"}});
  RuleVerdict v = Feed(*rule, {S(0, {img}), S(1, {img})});
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details, AllOf(HasSubstr("step 1"), HasSubstr("channel 1 mean 100")));
  Tensor ok = T("hybridsequential0_input_0", {0.1, -0.1, 0.1, -0.1}, {2, 2});
  EXPECT_EQ(
      Feed(*Make("CheckInputImages", {{"threshold_samples", "4"}}), {S(0, {ok}), S(1, {ok})}).kind,
      Kind::kNoIssuesFound);
  v = Feed(*Make("CheckInputImages"), {S(0, {ok})});
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, HasSubstr("fewer than threshold_samples (500)"));
}

TEST(NLPSequenceRatioTest, PaddingTokenShare) {
  Tensor seq = T("embedding0_input_0", {5, 0, 0, 0}, {1, 4});
  RuleVerdict v = Feed(*Make("NLPSequenceRatio"), {S(0, {seq})});
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details,
              HasSubstr("token 0 is 3 of 4 values (75%) > token_thresholds_percent 50%"));
  EXPECT_EQ(Feed(*Make("NLPSequenceRatio",
                       {{"token_values", "3, 0"}, {"token_thresholds_percent", "50, 80"}}),
                 {S(0, {seq})})
                .kind,
            Kind::kNoIssuesFound);
  EXPECT_EQ(Feed(*Make("NLPSequenceRatio"), {S(0, {T("x", {0})})}).kind, Kind::kError);
}

TEST(ConfusionTest, DiagonalAndOffDiagonal) {
  std::vector<double> y = {0, 1, 2, 0, 1, 2}, good = y, bad = {0, 0, 2, 0, 1, 2};
  EXPECT_EQ(Feed(*Make("Confusion"), LabelSteps(2, y, good)).kind, Kind::kNoIssuesFound);
  RuleVerdict v = Feed(*Make("Confusion"), LabelSteps(2, y, bad));
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details, AllOf(HasSubstr("step 0"), HasSubstr("< min_diag 0.9")));
  EXPECT_EQ(Feed(*Make("Confusion", {{"min_diag", "0.5"}, {"max_off_diag", "0.5"}}),
                 LabelSteps(2, y, bad))
                .kind,
            Kind::kNoIssuesFound);
  v = Feed(*Make("Confusion"), {S(0, {T("labels", {1, 0})})});
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, HasSubstr("no predictions"));
}

TEST(FeatureImportanceOverweightTest, TopFeaturesShare) {
  auto step = [](std::vector<double> w) {
    std::vector<Tensor> ts;
    for (size_t i = 0; i < w.size(); ++i) {
      ts.push_back(T("feature_importance/weight/f" + std::to_string(i), {w[i]}));
    }
    return S(0, ts);
  };
  RuleVerdict v = Feed(*Make("FeatureImportanceOverweight"), {step({10, 10, 10, 1, 1})});
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details, HasSubstr("> threshold 0.8"));
  EXPECT_EQ(Feed(*Make("FeatureImportanceOverweight"), {step({1, 1, 1, 1, 1})}).kind,
            Kind::kNoIssuesFound);
  v = Feed(*Make("FeatureImportanceOverweight"), {step({1, 2})});
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, HasSubstr("not more than nfeatures (3)"));
}

TEST(TreeDepthTest, ShallowTreesFire) {
  // Node ids up to 6: depth 2 < 4.
  RuleVerdict v = Feed(*Make("TreeDepth"), {S(0, {T("trees/Node", {0, 1, 2, 3, 4, 5, 6})})});
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details, HasSubstr("tree depth 2 < depth 4"));
  EXPECT_EQ(Feed(*Make("TreeDepth"), {S(0, {T("trees/Node", {0, 1, 30})})}).kind,
            Kind::kNoIssuesFound);
  EXPECT_EQ(Feed(*Make("TreeDepth", {{"depth", "2"}}), {S(0, {T("trees/Node", {0, 6})})}).kind,
            Kind::kNoIssuesFound);
  EXPECT_EQ(Feed(*Make("TreeDepth"), {S(0, {T("x", {1})})}).kind, Kind::kError);
}

TEST(StalledTrainingRuleTest, FiresWhenNoStepWithinThreshold) {
  absl::Time now = absl::FromUnixSeconds(1000000);
  RuleContext ctx;
  ctx.now = [&now] { return now; };
  auto rule = CreateBuiltinRule("StalledTrainingRule", {{"threshold", "60"}}, ctx);
  ASSERT_TRUE(rule.ok()) << rule.status();
  Rule& r = **rule;
  ASSERT_TRUE(r.NextDeadline().has_value());
  EXPECT_EQ(*r.NextDeadline(), now + absl::Seconds(60));
  now += absl::Seconds(50);
  EXPECT_EQ(r.OnStep(S(7, {}), testing::PyTorchInfo()).kind, Kind::kContinue);
  EXPECT_EQ(*r.NextDeadline(), now + absl::Seconds(60));
  EXPECT_EQ(r.OnTick(now + absl::Seconds(59)).kind, Kind::kContinue);
  RuleVerdict v = r.OnTick(now + absl::Seconds(61));
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details, AllOf(HasSubstr("since step 7"), HasSubstr("threshold 60s")));
  EXPECT_FALSE(r.NextDeadline().has_value());
}

TEST(StalledTrainingRuleTest, DefaultsAndEnd) {
  absl::Time now = absl::FromUnixSeconds(0);
  RuleContext ctx;
  ctx.now = [&now] { return now; };
  auto rule = CreateBuiltinRule(
      "StalledTrainingRule",
      {{"stop_training_on_fire", "True"}, {"training_job_name_prefix", "job-"}}, ctx);
  ASSERT_TRUE(rule.ok()) << rule.status();
  EXPECT_EQ(*(*rule)->NextDeadline(), now + absl::Seconds(1800));
  EXPECT_EQ((*rule)->OnTrainingEnd(testing::PyTorchInfo()).kind, Kind::kError);
  auto ok = CreateBuiltinRule("StalledTrainingRule", {}, ctx);
  (*ok)->OnStep(S(0, {}), testing::PyTorchInfo());
  EXPECT_EQ((*ok)->OnTrainingEnd(testing::PyTorchInfo()).kind, Kind::kNoIssuesFound);
  EXPECT_FALSE((*ok)->NextDeadline().has_value());
  // Other rules do not depend on time.
  EXPECT_FALSE(Make("VanishingGradient")->NextDeadline().has_value());
}

}  // namespace
}  // namespace debugplane::rules_engine
