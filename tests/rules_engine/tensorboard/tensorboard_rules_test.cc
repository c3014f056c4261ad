// The built-in rules over TensorBoard trials: the verdicts the fixtures'
// README expects of today's frameworks, and the rules that judge histograms
// (exactly, or saying when only a bound is possible).

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/jobs/rule_catalog.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rules_engine/catalog/builtin_rules.h"
#include "rules_engine/tensor_rules/other_trial_lookup.h"
#include "rules_engine/tensorboard/tensorboard_reader.h"
#include "tests/rules_engine/local_store.h"
#include "tests/rules_engine/tb_event_writer.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::rules_engine::tensorboard {
namespace {

using ::testing::HasSubstr;
using testing::Local;
using testing::TbEventWriter;
using Kind = RuleVerdict::Kind;

const std::string kFrameworks = DP_TEST_DATA_DIR "/frameworks";

// Evaluates rule `name` over the TensorBoard logs in `dir` as the scheduler
// does: the reader decodes what the rule wants, steps in order, then the end.
RuleVerdict Evaluate(const std::string& dir, const std::string& name,
                     const RuleParameters& params = {}) {
  absl::StatusOr<std::unique_ptr<Rule>> rule = CreateBuiltinRule(name, params);
  EXPECT_TRUE(rule.ok()) << rule.status();
  if (!rule.ok()) return RuleVerdict::Error("no rule");
  TensorBoardReader reader(Local(dir));
  reader.SetTrainingEnded();
  absl::StatusOr<std::vector<Step>> steps = reader.ReadNewSteps(
      [&](const std::string& t, const TrialInfo& info) { return (*rule)->Wants(t, info); },
      ReadBudget{});
  EXPECT_TRUE(steps.ok()) << steps.status();
  if (!steps.ok()) return RuleVerdict::Error(std::string(steps.status().message()));
  for (const Step& step : *steps) {
    RuleVerdict v = (*rule)->OnStep(step, reader.info());
    if (v.kind != Kind::kContinue) return v;
  }
  return (*rule)->OnTrainingEnd(reader.info());
}

TEST(TensorBoardRulesFixturesTest, PyTorchExplodingTensorAtStep183OnLossTrain) {
  const RuleVerdict v = Evaluate(kFrameworks + "/pytorch-h200-phases/tb", "ExplodingTensor");
  ASSERT_EQ(v.kind, Kind::kIssuesFound) << v.details;
  EXPECT_THAT(v.details, HasSubstr("step 183"));
  EXPECT_THAT(v.details, HasSubstr("loss/train"));
  EXPECT_THAT(v.details, HasSubstr("TRAIN"));
  EXPECT_THAT(v.details, HasSubstr("nan"));
}

TEST(TensorBoardRulesFixturesTest, HuggingFaceDivergeExplodingTensorAtStep5OnGradNorm) {
  const RuleVerdict v = Evaluate(kFrameworks + "/hf-trainer-diverge/tb", "ExplodingTensor");
  ASSERT_EQ(v.kind, Kind::kIssuesFound) << v.details;
  EXPECT_THAT(v.details, HasSubstr("step 5 "));
  EXPECT_THAT(v.details, HasSubstr("train/grad_norm"));
}

TEST(TensorBoardRulesFixturesTest, HuggingFaceOverfitIsOverfit) {
  const RuleVerdict v = Evaluate(kFrameworks + "/hf-trainer-overfit/tb", "Overfit");
  ASSERT_EQ(v.kind, Kind::kIssuesFound) << v.details;
  EXPECT_THAT(v.details, HasSubstr("mean validation loss"));
}

TEST(TensorBoardRulesFixturesTest, LightningOverfitIsOverfit) {
  const RuleVerdict v = Evaluate(kFrameworks + "/lightning-overfit/tb", "Overfit");
  ASSERT_EQ(v.kind, Kind::kIssuesFound) << v.details;
}

TEST(TensorBoardCatalogTest, TheCatalogSaysWhichRulesTensorBoardLogsCanFeed) {
  std::vector<std::string> gaps;
  for (const core::BuiltinRuleInfo& rule : core::BuiltinRules()) {
    if (!core::TensorBoardGap(rule.name).empty()) gaps.emplace_back(rule.name);
  }
  EXPECT_THAT(gaps,
              ::testing::UnorderedElementsAre(
                  "CreateXgboostReport", "DeadRelu", "PoorWeightInitialization",
                  "SaturatedActivation", "WeightUpdateRatio", "ClassImbalance", "CheckInputImages",
                  "NLPSequenceRatio", "Confusion", "FeatureImportanceOverweight", "TreeDepth"));
  EXPECT_THAT(std::string(core::TensorBoardGap("Confusion")), HasSubstr("labels"));
  EXPECT_TRUE(core::TensorBoardGap("LowGPUUtilization").empty());  // A profiler rule.
  EXPECT_TRUE(core::TensorBoardGap("NoSuchRule").empty());
}

class TensorBoardHistogramRulesTest : public ::testing::Test {
 protected:
  TensorBoardHistogramRulesTest()
      : writer_((dir_.path() / "events.out.tfevents.1.host.1.0").string()) {}
  HistogramStats Histogram(double min, double max, double num, double sum, double ss,
                           std::vector<double> limits, std::vector<double> counts) {
    HistogramStats h;
    h.min = min;
    h.max = max;
    h.num = num;
    h.sum = sum;
    h.sum_squares = ss;
    h.bucket_limit = std::move(limits);
    h.bucket = std::move(counts);
    return h;
  }
  std::string dir() const { return dir_.path().string(); }
  ::debugplane::testing::ScopedTempDir dir_;
  TbEventWriter writer_;
};

TEST_F(TensorBoardHistogramRulesTest, ExplodingTensorReadsHistogramMinMaxSum) {
  writer_.Histogram(1, "gradients/fc1.weight", Histogram(-1, 1, 4, 0, 2, {0, 1}, {2, 2}));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  writer_.Histogram(2, "gradients/fc1.weight", Histogram(-1, 1, 4, nan, 2, {0, 1}, {2, 2}));
  const RuleVerdict v = Evaluate(dir(), "ExplodingTensor");
  ASSERT_EQ(v.kind, Kind::kIssuesFound) << v.details;
  EXPECT_THAT(v.details, HasSubstr("step 2"));
  EXPECT_THAT(v.details, HasSubstr("gradients/fc1.weight histogram sum is nan"));
}

TEST_F(TensorBoardHistogramRulesTest, VanishingGradientFromBuckets) {
  // Every value within +-1e-9: mean |x| at most 1e-9 whatever the buckets hold.
  writer_.Histogram(1, "gradients/fc1.weight",
                    Histogram(-1e-9, 1e-9, 10, 0, 1e-18, {0, 1e-9}, {5, 5}));
  const RuleVerdict v = Evaluate(dir(), "VanishingGradient");
  ASSERT_EQ(v.kind, Kind::kIssuesFound) << v.details;
  EXPECT_THAT(v.details, HasSubstr("mean |x|"));
  EXPECT_THAT(v.details, HasSubstr("histogram"));
}

TEST_F(TensorBoardHistogramRulesTest, VanishingGradientSaysWhenOnlyABoundIsPossible) {
  // TF2's form (no exact moments): buckets from -1 to 1 around zero, where
  // mean |x| may be anywhere between 0 and 1.
  writer_.Tf2Histogram(1, "gradients/fc1.weight", {{{-1, 1, 10}}});
  const RuleVerdict v = Evaluate(dir(), "VanishingGradient");
  ASSERT_EQ(v.kind, Kind::kNoIssuesFound) << v.details;
  EXPECT_THAT(v.details, HasSubstr("could only bound mean |x|"));
}

TEST_F(TensorBoardHistogramRulesTest, AllZeroFromSumOfSquares) {
  writer_.Histogram(1, "weights/fc1.weight", Histogram(0, 0, 8, 0, 0, {0}, {8}));
  const RuleVerdict v = Evaluate(dir(), "AllZero", {{"collection_names", "weights"}});
  ASSERT_EQ(v.kind, Kind::kIssuesFound) << v.details;
  EXPECT_THAT(v.details, HasSubstr("all of its 8 values zero"));
}

TEST_F(TensorBoardHistogramRulesTest, TensorVarianceFromMoments) {
  // Values {-3, 3} x 5: variance 9.
  writer_.Histogram(1, "weights/fc1.weight", Histogram(-3, 3, 10, 0, 90, {0, 3}, {5, 5}));
  const RuleVerdict v =
      Evaluate(dir(), "TensorVariance", {{"collection_names", "weights"}, {"max_threshold", "5"}});
  ASSERT_EQ(v.kind, Kind::kIssuesFound) << v.details;
  EXPECT_THAT(v.details, HasSubstr("variance 9 > max_threshold 5"));
}

TEST_F(TensorBoardHistogramRulesTest, UnchangedTensorComparesHistograms) {
  for (int step = 1; step <= 4; ++step) {
    writer_.Histogram(step, "weights/fc1.weight", Histogram(-1, 1, 4, 0, 2, {0, 1}, {2, 2}));
  }
  const RuleVerdict v =
      Evaluate(dir(), "UnchangedTensor", {{"collection_names", "weights"}, {"num_steps", "3"}});
  ASSERT_EQ(v.kind, Kind::kIssuesFound) << v.details;
  EXPECT_THAT(v.details, HasSubstr("unchanged"));
}

TEST_F(TensorBoardHistogramRulesTest, ScalarLossesPairTrainAndEvalForOverfit) {
  for (int step = 1; step <= 40; ++step) {
    writer_.Scalar(step, "Loss/train", 2.0f / step);
    if (step % 10 == 0) writer_.Scalar(step, "Loss/eval", 1.0f + step / 10.0f);
  }
  const RuleVerdict v = Evaluate(dir(), "Overfit");
  ASSERT_EQ(v.kind, Kind::kIssuesFound) << v.details;
  EXPECT_THAT(v.details, HasSubstr("EVAL"));
}

TEST_F(TensorBoardHistogramRulesTest, SimilarAcrossRunsComparesWithAnotherRunsLogs) {
  // This run and a reference run (its own TensorBoard logs) part at step 3.
  ::debugplane::testing::ScopedTempDir reference;
  TbEventWriter other((reference.path() / "events.out.tfevents.1.host.1.0").string());
  for (int step = 1; step <= 4; ++step) {
    writer_.Scalar(step, "train/loss", 1.0f / step);
    other.Scalar(step, "train/loss", step < 3 ? 1.0f / step : 5.0f);
  }
  OtherTrialCache cache;
  const objectstore::StoreLocation location = Local(reference.path().string());
  absl::StatusOr<Tensor> read = cache.Read(location, 2, "train/loss");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->values, std::vector<double>{0.5});
  RuleContext context;
  context.other_trial = cache.AsLookup(
      [&](const std::string&) -> absl::StatusOr<objectstore::StoreLocation> { return location; });
  absl::StatusOr<std::unique_ptr<Rule>> rule =
      CreateBuiltinRule("SimilarAcrossRuns", {{"other_trials", "reference"}}, context);
  ASSERT_TRUE(rule.ok()) << rule.status();
  TensorBoardReader reader(Local(dir()));
  reader.SetTrainingEnded();
  absl::StatusOr<std::vector<Step>> steps = reader.ReadNewSteps(
      [&](const std::string& t, const TrialInfo& info) { return (*rule)->Wants(t, info); },
      ReadBudget{});
  ASSERT_TRUE(steps.ok()) << steps.status();
  RuleVerdict v;
  for (const Step& step : *steps) {
    v = (*rule)->OnStep(step, reader.info());
    if (v.kind != Kind::kContinue) break;
  }
  ASSERT_EQ(v.kind, Kind::kIssuesFound) << v.details;
  EXPECT_THAT(v.details, HasSubstr("step 3"));
  EXPECT_THAT(v.details, HasSubstr("train/loss"));
}

}  // namespace
}  // namespace debugplane::rules_engine::tensorboard
