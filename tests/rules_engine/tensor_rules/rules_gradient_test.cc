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

TEST(VanishingGradientTest, DefaultThresholdFiresBelow1e7) {
  auto rule = Make("VanishingGradient");
  EXPECT_EQ(rule->RequiredCollections(), std::vector<std::string>{"gradients"});
  RuleVerdict v = Feed(*rule, {S(0, {T("gradient/fc1.weight", {1e-3, -1e-3})}),
                               S(12, {T("gradient/fc1.weight", {1.5e-39, 0})}, Mode::kTrain, 10)});
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details, AllOf(HasSubstr("step 12 (TRAIN step 10)"),
                               HasSubstr("gradient/fc1.weight"), HasSubstr("< threshold 1e-07")));
}

TEST(VanishingGradientTest, HealthyGradientsAndCustomThreshold) {
  auto rule = Make("VanishingGradient");
  EXPECT_EQ(Feed(*rule, {S(0, {T("gradient/a", {2.3e-3})}), S(1, {T("gradient/a", {1e-6})})}).kind,
            Kind::kNoIssuesFound);
  auto strict = Make("VanishingGradient", {{"threshold", "1e-5"}});
  EXPECT_EQ(Feed(*strict, {S(0, {T("gradient/a", {1e-6})})}).kind, Kind::kIssuesFound);
}

TEST(VanishingGradientTest, NoGradientsIsAnErrorSayingWhatWasNeeded) {
  auto rule = Make("VanishingGradient");
  RuleVerdict v = Feed(*rule, {S(0, {T("CrossEntropyLoss_output_0", {0.5})})});
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, AllOf(HasSubstr("no tensor of collection 'gradients'"),
                               HasSubstr("collections saved")));
}

TEST(ExplodingTensorTest, NanOrInfInAnyTensorByDefault) {
  EXPECT_EQ(Feed(*Make("ExplodingTensor"), {S(2, {T("fc1.weight", {1, INFINITY})})}).kind,
            Kind::kIssuesFound);
  RuleVerdict v = Feed(*Make("ExplodingTensor"), {S(2, {T("loss", {NAN})})});
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details, AllOf(HasSubstr("step 2"), HasSubstr("loss"), HasSubstr("nan")));
  EXPECT_EQ(Feed(*Make("ExplodingTensor"), {S(0, {T("a", {1e30, -1e30})})}).kind,
            Kind::kNoIssuesFound);
}

TEST(ExplodingTensorTest, OnlyNanIgnoresInfinityAndSelectionRestricts) {
  EXPECT_EQ(
      Feed(*Make("ExplodingTensor", {{"only_nan", "True"}}), {S(0, {T("a", {INFINITY})})}).kind,
      Kind::kNoIssuesFound);
  auto grads = Make("ExplodingTensor", {{"collection_names", "gradients"}});
  EXPECT_EQ(grads->RequiredCollections(), std::vector<std::string>{"gradients"});
  EXPECT_EQ(Feed(*grads, {S(0, {T("fc1.weight", {NAN}), T("gradient/fc1.weight", {1})})}).kind,
            Kind::kNoIssuesFound);
  auto regex = Make("ExplodingTensor", {{"tensor_regex", ".*weight"}});
  EXPECT_EQ(Feed(*regex, {S(0, {T("fc1.weight", {NAN})})}).kind, Kind::kIssuesFound);
  EXPECT_EQ(
      Feed(*Make("ExplodingTensor", {{"tensor_regex", "nomatch"}}), {S(0, {T("a", {NAN})})}).kind,
      Kind::kError);
}

TEST(WeightUpdateRatioTest, TooSmallAndTooLargeUpdates) {
  // lr 0: no update.
  RuleVerdict v = Feed(*Make("WeightUpdateRatio"),
                       {S(0, {T("fc1.weight", {1, 2})}), S(1, {T("fc1.weight", {1, 2})})});
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details, HasSubstr("< small_threshold"));
  v = Feed(*Make("WeightUpdateRatio"),
           {S(0, {T("fc1.weight", {1, 0})}), S(1, {T("fc1.weight", {100, 0})})});
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details, HasSubstr("> large_threshold 10"));
}

TEST(WeightUpdateRatioTest, EvalStepsAndDistantStepsAreNotCompared) {
  auto rule = Make("WeightUpdateRatio", {{"num_steps", "2"}});
  RuleVerdict v =
      Feed(*rule, {S(0, {T("fc1.weight", {1, 2})}), S(1, {T("fc1.weight", {1, 2})}, Mode::kEval, 0),
                   S(5, {T("fc1.weight", {1, 2})}),  // 5 steps later: new base.
                   S(6, {T("fc1.weight", {1.01, 2})})});
  EXPECT_EQ(v.kind, Kind::kNoIssuesFound) << v.details;
  EXPECT_EQ(Feed(*Make("WeightUpdateRatio"), {S(0, {T("fc1.weight", {1})})}).kind, Kind::kError);
}

TEST(PoorWeightInitializationTest, NarrowGradientDistributionFires) {
  RuleVerdict v =
      Feed(*Make("PoorWeightInitialization"), {S(0, {T("gradient/a", {1e-5, -1e-5, 2e-5, 0})})});
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details, HasSubstr("< distribution_range 0.001"));
}

TEST(PoorWeightInitializationTest, ActivationVarianceRatioAndLossPatience) {
  RuleVerdict v = Feed(*Make("PoorWeightInitialization"),
                       {S(0, {T("relu1_relu_input", {-1, 1}), T("relu2_relu_input", {-10, 10})})});
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details, HasSubstr("variance ratio 100"));
  std::vector<Step> flat;
  for (int i = 0; i < 8; ++i) flat.push_back(S(i, {T("CrossEntropyLoss_output_0", {0.7})}));
  v = Feed(*Make("PoorWeightInitialization"), flat);
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details, HasSubstr("patience 5"));
}

TEST(PoorWeightInitializationTest, GoodInitAndOnlyFirstStepsAnalysed) {
  std::vector<Step> steps;
  for (int i = 0; i < 12; ++i) {
    steps.push_back(S(i, {T("gradient/a", {-0.1, 0.1, 0.05, -0.05}),
                          T("CrossEntropyLoss_output_0", {1.0 - 0.01 * i})}));
  }
  // Past `steps` (10) nothing counts: a flat loss later is not judged.
  for (int i = 12; i < 30; ++i) steps.push_back(S(i, {T("CrossEntropyLoss_output_0", {0.5})}));
  EXPECT_EQ(Feed(*Make("PoorWeightInitialization"), steps).kind, Kind::kNoIssuesFound);
  EXPECT_EQ(Feed(*Make("PoorWeightInitialization"), {S(0, {T("fc1.weight", {1})})}).kind,
            Kind::kError);
}

}  // namespace
}  // namespace debugplane::rules_engine
