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

const char kLoss[] = "CrossEntropyLoss_output_0";

// `n` TRAIN steps with loss f(i).
template <typename F>
std::vector<Step> TrainLosses(int n, F f) {
  std::vector<Step> steps;
  for (int i = 0; i < n; ++i) steps.push_back(S(i, {T(kLoss, {f(i)})}));
  return steps;
}

TEST(LossNotDecreasingTest, FlatLossFiresAfterNumSteps) {
  auto rule = Make("LossNotDecreasing");
  EXPECT_EQ(rule->RequiredCollections(), std::vector<std::string>{"losses"});
  RuleVerdict v = Feed(*rule, TrainLosses(20, [](int) { return 0.7; }));
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details, AllOf(HasSubstr("step 10 (TRAIN step 10)"), HasSubstr(kLoss),
                               HasSubstr("less than diff_percent 0.1")));
}

TEST(LossNotDecreasingTest, DecreasingLossAndCustomNumSteps) {
  EXPECT_EQ(
      Feed(*Make("LossNotDecreasing"), TrainLosses(40, [](int i) { return 1.0 / (i + 1); })).kind,
      Kind::kNoIssuesFound);
  // With num_steps 30 only steps 0 and 30 are compared.
  auto rule = Make("LossNotDecreasing", {{"num_steps", "30"}});
  EXPECT_EQ(Feed(*rule, TrainLosses(31, [](int i) { return i == 10 ? 5.0 : 1.0 - i * 0.01; })).kind,
            Kind::kNoIssuesFound);
}

TEST(LossNotDecreasingTest, IncreaseAboveTheMinimumFires) {
  // 1.0 -> 0.5 -> 2.0 (check fires: not decreasing) ; with a big jump then a partial
  // recovery the increase check names the minimum.
  auto rule = Make("LossNotDecreasing", {{"num_steps", "1"}});
  RuleVerdict v =
      Feed(*rule, {S(0, {T(kLoss, {1.0})}), S(1, {T(kLoss, {0.5})}), S(2, {T(kLoss, {0.6})})});
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details, HasSubstr("above its lowest checked value 0.5"));
}

TEST(LossNotDecreasingTest, UnsetModePrefersEvalOnceSeen) {
  // Noisy TRAIN losses would fail; the EVAL losses decrease.
  std::vector<Step> steps;
  int g = 0;
  for (int i = 0; i < 25; ++i) {
    steps.push_back(S(g++, {T(kLoss, {i % 2 ? 0.9 : 0.1})}, Mode::kTrain, i));
    steps.push_back(S(g++, {T(kLoss, {1.0 - 0.02 * i})}, Mode::kEval, i));
  }
  EXPECT_EQ(Feed(*Make("LossNotDecreasing"), steps).kind, Kind::kNoIssuesFound);
  EXPECT_EQ(Feed(*Make("LossNotDecreasing", {{"mode", "TRAIN"}}), steps).kind, Kind::kIssuesFound);
  EXPECT_EQ(Feed(*Make("LossNotDecreasing", {{"mode", "EVAL"}}), steps).kind, Kind::kNoIssuesFound);
  // GLOBAL: all steps by global step, mixing the modes.
  EXPECT_EQ(Feed(*Make("LossNotDecreasing", {{"mode", "GLOBAL"}}), steps).kind, Kind::kIssuesFound);
}

TEST(LossNotDecreasingTest, ErrorsSayWhatWasMissing) {
  RuleVerdict v = Feed(*Make("LossNotDecreasing"), {S(0, {T("fc1.weight", {1})})});
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, HasSubstr("no loss tensor was saved"));
  v = Feed(*Make("LossNotDecreasing"), TrainLosses(5, [](int) { return 1.0; }));
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, HasSubstr("never num_steps (10) steps apart"));
  // Custom selection without the losses collection.
  auto rule =
      Make("LossNotDecreasing", {{"use_losses_collection", "False"}, {"tensor_regex", "my_loss"}});
  EXPECT_EQ(Feed(*rule, TrainLosses(20, [](int) { return 1.0; })).kind, Kind::kError);
}

// TRAIN stretches of `train` loss and single-step EVAL passes of `val`.
std::vector<Step> Passes(int passes, double train, double val) {
  std::vector<Step> steps;
  int g = 0, t = 0;
  for (int p = 0; p < passes; ++p) {
    for (int i = 0; i < 4; ++i) steps.push_back(S(g++, {T(kLoss, {train})}, Mode::kTrain, t++));
    steps.push_back(S(g++, {T(kLoss, {val})}, Mode::kEval, p));
  }
  return steps;
}

TEST(OverfitTest, ValidationFarAboveTrainingFires) {
  RuleVerdict v = Feed(*Make("Overfit"), Passes(3, 0.1, 1.0));
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details,
              AllOf(HasSubstr("step 4 (EVAL step 0)"), HasSubstr("> ratio_threshold 0.1")));
}

TEST(OverfitTest, CloseLossesPatienceAndStartStep) {
  EXPECT_EQ(Feed(*Make("Overfit"), Passes(3, 1.0, 1.05)).kind, Kind::kNoIssuesFound);
  // Patience 3 needs three passes in a row.
  EXPECT_EQ(Feed(*Make("Overfit", {{"patience", "3"}}), Passes(2, 0.1, 1.0)).kind,
            Kind::kNoIssuesFound);
  EXPECT_EQ(Feed(*Make("Overfit", {{"patience", "3"}}), Passes(3, 0.1, 1.0)).kind,
            Kind::kIssuesFound);
  EXPECT_EQ(Feed(*Make("Overfit", {{"start_step", "100"}}), Passes(3, 0.1, 1.0)).kind,
            Kind::kError);
}

TEST(OverfitTest, NoEvalIsAnError) {
  RuleVerdict v = Feed(*Make("Overfit"), TrainLosses(10, [](int) { return 1.0; }));
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, HasSubstr("found 10 TRAIN and 0 EVAL steps"));
}

TEST(OvertrainingTest, PlateauFiresImprovementDoesNot) {
  RuleVerdict v = Feed(*Make("Overtraining"), TrainLosses(10, [](int i) { return 0.5; }));
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details, AllOf(HasSubstr("training loss"), HasSubstr("patience_train 5")));
  EXPECT_EQ(Feed(*Make("Overtraining"), TrainLosses(30, [](int i) { return 1.0 - 0.02 * i; })).kind,
            Kind::kNoIssuesFound);
  EXPECT_EQ(Feed(*Make("Overtraining", {{"patience_train", "100"}, {"patience_validation", "2"}}),
                 Passes(4, 0.1, 1.0))
                .kind,
            Kind::kIssuesFound);
  EXPECT_EQ(Feed(*Make("Overtraining"), {S(0, {T("fc1.weight", {1})})}).kind, Kind::kError);
}

}  // namespace
}  // namespace debugplane::rules_engine
