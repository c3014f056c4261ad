// Activation and generic tensor rules.

#include <cmath>
#include <limits>

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
using testing::PyTorchInfo;
using testing::S;
using testing::T;
using Kind = RuleVerdict::Kind;

// A [batch, units] ReLU output where the first `dead` units are always 0.
Tensor Relu(const std::string& name, int batch, int units, int dead) {
  std::vector<double> v;
  for (int b = 0; b < batch; ++b) {
    for (int u = 0; u < units; ++u) v.push_back(u < dead ? 0.0 : 1.0 + b);
  }
  return T(name, v, {batch, units});
}

TEST(DeadReluTest, DefaultsUseTheReluOutputCollection) {
  auto rule = Make("DeadRelu");
  EXPECT_EQ(rule->RequiredCollections(), std::vector<std::string>{"relu_output"});
  EXPECT_TRUE(rule->Wants("relu1_output_0", PyTorchInfo()));
  EXPECT_TRUE(rule->Wants("conv_relu_output", PyTorchInfo()));
  RuleVerdict v = Feed(*rule, {S(3, {Relu("relu1_output_0", 4, 8, 5)})});
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details, AllOf(HasSubstr("step 3"), HasSubstr("relu1_output_0"),
                               HasSubstr("62.5% of 8"), HasSubstr("threshold_layer 50%")));
  EXPECT_EQ(Feed(*Make("DeadRelu"), {S(0, {Relu("relu1_output_0", 4, 8, 1)})}).kind,
            Kind::kNoIssuesFound);
}

TEST(DeadReluTest, ThresholdsAndExplicitRegex) {
  EXPECT_EQ(Feed(*Make("DeadRelu", {{"threshold_layer", "10"}}),
                 {S(0, {Relu("relu1_output_0", 4, 8, 1)})})
                .kind,
            Kind::kIssuesFound);
  // A unit active in 1 of 4 samples (25%) is dead under threshold_inactivity 30.
  Tensor t = T("relu1_output_0", {1, 1, 0, 1, 0, 1, 0, 1}, {4, 2});
  EXPECT_EQ(Feed(*Make("DeadRelu", {{"threshold_inactivity", "30"}, {"threshold_layer", "40"}}),
                 {S(0, {t})})
                .kind,
            Kind::kIssuesFound);
  auto custom = Make("DeadRelu", {{"tensor_regex", ".*ReLU_output"}});
  EXPECT_FALSE(custom->Wants("relu1_output_0", PyTorchInfo()));
  EXPECT_EQ(Feed(*custom, {S(0, {Relu("relu1_output_0", 4, 8, 8)})}).kind, Kind::kError);
}

TEST(SaturatedActivationTest, SaturatedTanhAndSigmoidInputs) {
  Tensor tanh = T("layer_tanh_input", {20, 30, -20, 0.5}, {2, 2});  // unit 0 saturated.
  EXPECT_EQ(Feed(*Make("SaturatedActivation"), {S(0, {tanh})}).kind, Kind::kNoIssuesFound);
  Tensor all = T("layer_sigmoid_input", {-30, 20, -25, 18}, {2, 2});
  RuleVerdict v = Feed(*Make("SaturatedActivation"), {S(1, {all})});
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details, AllOf(HasSubstr("100% of 2 sigmoid units"), HasSubstr("(-23, 17)")));
  EXPECT_EQ(Feed(*Make("SaturatedActivation"), {S(0, {T("fc1.weight", {1})})}).kind, Kind::kError);
}

TEST(TensorVarianceTest, AboveMaxBelowMin) {
  auto rule = Make(
      "TensorVariance",
      {{"collection_names", "weights"}, {"max_threshold", "10"}, {"min_threshold", "0.00001"}});
  EXPECT_EQ(rule->RequiredCollections(), std::vector<std::string>{"weights"});
  EXPECT_EQ(Feed(*rule, {S(0, {T("fc1.weight", {-1, 1})})}).kind, Kind::kNoIssuesFound);
  auto r2 = Make("TensorVariance", {{"collection_names", "weights"}, {"max_threshold", "10"}});
  RuleVerdict v = Feed(*r2, {S(0, {T("fc1.weight", {-10, 10})})});
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details, HasSubstr("variance 100 > max_threshold 10"));
  auto r3 = Make("TensorVariance", {{"tensor_regex", "fc"}, {"min_threshold", "0.1"}});
  EXPECT_EQ(Feed(*r3, {S(0, {T("fc1.weight", {1, 1})})}).kind, Kind::kIssuesFound);
  auto r4 = Make("TensorVariance", {{"tensor_regex", "fc"}, {"min_threshold", "0.1"}});
  EXPECT_EQ(Feed(*r4, {S(0, {T("x", {1, 1})})}).kind, Kind::kError);
}

TEST(UnchangedTensorTest, UnchangedForNumStepsFires) {
  auto rule = Make("UnchangedTensor", {{"collection_names", "weights"}});
  RuleVerdict v = Feed(*rule, {S(0, {T("fc1.weight", {1, 2})}), S(1, {T("fc1.weight", {1, 2})}),
                               S(2, {T("fc1.weight", {1, 2 + 1e-9})})});
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details, AllOf(HasSubstr("step 2"), HasSubstr("fc1.weight is unchanged"),
                               HasSubstr("num_steps 3")));
}

TEST(UnchangedTensorTest, ChangesEvalInterleavingAndTolerances) {
  auto rule = Make("UnchangedTensor", {{"collection_names", "weights"}});
  // Weights do not change during EVAL steps: series are per mode.
  RuleVerdict v =
      Feed(*rule, {S(0, {T("fc1.weight", {1})}), S(1, {T("fc1.weight", {1.1})}),
                   S(2, {T("fc1.weight", {1.1})}, Mode::kEval, 0), S(3, {T("fc1.weight", {1.2})}),
                   S(4, {T("fc1.weight", {1.2})}, Mode::kEval, 1)});
  EXPECT_EQ(v.kind, Kind::kNoIssuesFound) << v.details;
  auto loose =
      Make("UnchangedTensor", {{"tensor_regex", "fc1"}, {"atol", "0.5"}, {"num_steps", "2"}});
  EXPECT_EQ(Feed(*loose, {S(0, {T("fc1.weight", {1})}), S(1, {T("fc1.weight", {1.1})})}).kind,
            Kind::kIssuesFound);
  auto nan =
      Make("UnchangedTensor", {{"tensor_regex", "x"}, {"num_steps", "2"}, {"equal_nan", "True"}});
  EXPECT_EQ(Feed(*nan, {S(0, {T("x", {NAN})}), S(1, {T("x", {NAN})})}).kind, Kind::kIssuesFound);
  EXPECT_EQ(Feed(*Make("UnchangedTensor", {{"tensor_regex", "x"}}), {S(0, {T("x", {1})})}).kind,
            Kind::kError);
}

TEST(AllZeroTest, AllTensorsByDefaultAndThreshold) {
  RuleVerdict v = Feed(*Make("AllZero"), {S(0, {T("a", {1, 2}), T("b", {0, 0, 0})})});
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details,
              AllOf(HasSubstr("b has 3 of 3 values zero"), HasSubstr(">= threshold 100%")));
  EXPECT_EQ(Feed(*Make("AllZero"), {S(0, {T("b", {0, 0, 1})})}).kind, Kind::kNoIssuesFound);
  EXPECT_EQ(Feed(*Make("AllZero", {{"threshold", "60"}}), {S(0, {T("b", {0, 0, 1})})}).kind,
            Kind::kIssuesFound);
  EXPECT_EQ(
      Feed(*Make("AllZero", {{"collection_names", "gradients"}}), {S(0, {T("b", {0, 0})})}).kind,
      Kind::kError);
}

TEST(SimilarAcrossRunsTest, ComparesWithTheOtherTrialThroughTheLookup) {
  std::map<std::pair<int64_t, std::string>, Tensor> other = {
      {{0, "CrossEntropyLoss_output_0"}, T("CrossEntropyLoss_output_0", {0.7})},
      {{1, "CrossEntropyLoss_output_0"}, T("CrossEntropyLoss_output_0", {0.9})}};
  RuleContext ctx;
  std::vector<std::string> asked;
  ctx.other_trial = [&](const std::string& trial, int64_t step,
                        const std::string& tensor) -> absl::StatusOr<Tensor> {
    asked.push_back(trial);
    auto it = other.find({step, tensor});
    if (it == other.end()) return absl::NotFoundError("none");
    return it->second;
  };
  auto rule = CreateBuiltinRule("SimilarAcrossRuns",
                                {{"other_trials", "job-2"}, {"collection_names", "losses"}}, ctx);
  ASSERT_TRUE(rule.ok()) << rule.status();
  RuleVerdict v = Feed(**rule, {S(0, {T("CrossEntropyLoss_output_0", {0.7})}),
                                S(1, {T("CrossEntropyLoss_output_0", {0.5})})});
  EXPECT_EQ(v.kind, Kind::kIssuesFound);
  EXPECT_THAT(v.details,
              AllOf(HasSubstr("step 1"), HasSubstr("0.5 here and 0.9 in trial 'job-2'")));
  EXPECT_EQ(asked.front(), "job-2");

  auto same = CreateBuiltinRule("SimilarAcrossRuns", {{"other_trials", "job-2"}}, ctx);
  EXPECT_EQ(Feed(**same, {S(0, {T("CrossEntropyLoss_output_0", {0.7})}), S(5, {T("z", {1})})}).kind,
            Kind::kNoIssuesFound);
  auto none = CreateBuiltinRule("SimilarAcrossRuns", {{"other_trials", "job-2"}}, ctx);
  v = Feed(**none, {S(7, {T("z", {1})})});
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, HasSubstr("1 tensors missing from the other trial"));
  ctx.other_trial = [](const std::string&, int64_t, const std::string&) -> absl::StatusOr<Tensor> {
    return absl::DataLossError("corrupt");
  };
  auto broken = CreateBuiltinRule("SimilarAcrossRuns", {{"other_trials", "job-2"}}, ctx);
  v = Feed(**broken, {S(0, {T("z", {1})})});
  EXPECT_EQ(v.kind, Kind::kError);
  EXPECT_THAT(v.details, HasSubstr("corrupt"));
}

// --- Shared selection and scans (rule_internal.h) --------------------------------

TEST(TensorSelectorTest, RemembersAnswersPerTrialInfoAndOrder) {
  internal::TensorSelector s({"weights"}, {"gradient/"});
  s.names = {"labels"};
  const TrialInfo info = PyTorchInfo();
  // Asked in one order, then another, then the first again: same answers.
  const std::vector<std::pair<std::string, bool>> cases = {
      {"fc1.weight", true}, {"gradient/fc1.weight", true},
      {"fc1.bias", false},  {"labels", true},
      {"labels2", false},   {"CrossEntropyLoss_output_0", false}};
  for (int round = 0; round < 3; ++round) {
    for (size_t k = 0; k < cases.size(); ++k) {
      const auto& [name, want] = cases[round == 1 ? cases.size() - 1 - k : k];
      EXPECT_EQ(s.Matches(name, info), want) << name << " round " << round;
    }
  }
  // Another TrialInfo (here without collections) is answered afresh.
  const TrialInfo bare;
  EXPECT_FALSE(s.Matches("fc1.weight", bare));
  EXPECT_TRUE(s.Matches("gradient/fc1.weight", bare));
  EXPECT_TRUE(s.Matches("fc1.weight", info));
  EXPECT_EQ(s.Describe(), "tensor 'labels' or tensor_regex 'gradient/' or collection 'weights'");
}

TEST(TensorSelectorTest, ModesSelectSteps) {
  internal::TensorSelector s({"weights"}, {});
  EXPECT_TRUE(s.Selects(S(0, {}, Mode::kEval)));
  s.modes = internal::TensorSelector::TrainingModes();
  EXPECT_TRUE(s.Selects(S(0, {}, Mode::kTrain)));
  EXPECT_TRUE(s.Selects(S(0, {}, Mode::kGlobal)));
  EXPECT_FALSE(s.Selects(S(0, {}, Mode::kEval)));
  EXPECT_FALSE(s.Selects(S(0, {}, Mode::kPredict)));
}

TEST(RuleScansTest, CountZerosAndAllFiniteAtEveryLength) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (size_t n = 0; n < 40; ++n) {
    std::vector<double> v(n);
    int64_t zeros = 0;
    for (size_t i = 0; i < n; ++i) {
      v[i] = i % 3 == 0 ? (i % 2 ? -0.0 : 0.0) : 1.5 * static_cast<double>(i);
      zeros += v[i] == 0;
    }
    EXPECT_EQ(internal::CountZeros(v), zeros) << n;
    EXPECT_TRUE(internal::AllFinite(v)) << n;
    for (size_t i = 0; i < n; ++i) {
      for (double bad : {nan, inf, -inf}) {
        std::vector<double> w = v;
        w[i] = bad;
        EXPECT_FALSE(internal::AllFinite(w)) << n << " at " << i;
      }
    }
  }
}

}  // namespace
}  // namespace debugplane::rules_engine
