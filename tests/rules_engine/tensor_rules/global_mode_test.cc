// Steps saved in GLOBAL mode (a hook that was never told its mode, as
// XGBoost's and many scripts' are) are training steps for every built-in
// rule whose documentation does not say otherwise.
//
// Each rule runs over a real trial (TrialWriter -> TrialReader -> rule, as
// the scheduler runs it) written twice: once with its training steps in
// TRAIN mode, once in GLOBAL mode. Both must reach the same verdict, with the
// same details but for the mode's name, and the table covers every built-in
// tensor rule.

#include <cctype>
#include <cmath>
#include <functional>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "objectstore/local_object_store.h"
#include "rules_engine/catalog/builtin_rules.h"
#include "rules_engine/rule/rule.h"
#include "rules_engine/smdebug/trial_reader.h"
#include "rules_engine/tensor_rules/other_trial_lookup.h"
#include "tests/rules_engine/rule_verdict_names.h"
#include "tests/rules_engine/trial_writer.h"

namespace debugplane::rules_engine {
namespace {

using ::testing::HasSubstr;
using testing::TensorSpec;
using testing::TrialWriter;
using Kind = RuleVerdict::Kind;
using testing::KindName;

// Writes the trial of one case, its training steps in `mode`.
using WriteTrial = std::function<void(TrialWriter& writer, Mode mode)>;

struct GlobalModeCase {
  std::string rule;
  RuleParameters params;
  WriteTrial write;
  Kind expected;       // In both modes.
  std::string detail;  // In the GLOBAL run's details.
  // SimilarAcrossRuns: the trial its other_trials names.
  WriteTrial write_other = nullptr;
};

// gtest prints the case by its rule (instead of its bytes).
void PrintTo(const GlobalModeCase& c, std::ostream* os) { *os << c.rule; }

// `n` steps in `mode` (global step = mode step = i) of tensors(i).
void Steps(TrialWriter& w, Mode mode, int n,
           const std::function<std::vector<TensorSpec>(int)>& at) {
  for (int i = 0; i < n; ++i) w.AddStep(i, mode, i, at(i));
}

// One tensor `name` of `values` (shape [values.size()], or a scalar).
std::vector<TensorSpec> One(const std::string& name, std::vector<double> values,
                            std::vector<int64_t> shape = {}) {
  if (shape.empty() && values.size() != 1) shape = {static_cast<int64_t>(values.size())};
  return {{name, std::move(shape), std::move(values)}};
}

const char kLoss[] = "CrossEntropyLoss_output_0";

// Runs `c` over a trial written in `mode` under `dir`, as the scheduler
// would: only the wanted tensors are decoded, steps in order, OnTrainingEnd
// unless a step concluded.
RuleVerdict RunCase(const GlobalModeCase& c, Mode mode, const std::string& dir) {
  TrialWriter writer(dir);
  c.write(writer, mode);
  writer.EndTraining();
  const std::string other_dir = dir + "_other";
  if (c.write_other) {
    TrialWriter other(other_dir);
    c.write_other(other, mode);
    other.EndTraining();
  }
  OtherTrialCache cache;
  RuleContext context;
  context.now = [] { return absl::FromUnixSeconds(1700000000); };
  context.other_trial = cache.AsLookup(
      [other_dir](const std::string&) { return objectstore::OpenLocalPath(other_dir); });
  absl::StatusOr<std::unique_ptr<Rule>> rule = CreateBuiltinRule(c.rule, c.params, context);
  EXPECT_TRUE(rule.ok()) << rule.status();
  if (!rule.ok()) return RuleVerdict::Error("create failed");
  Rule* r = rule->get();
  TrialReader reader(objectstore::OpenLocalPath(dir).value());
  absl::StatusOr<std::vector<Step>> steps = reader.ReadNewSteps(
      [r](const std::string& tensor, const TrialInfo& info) { return r->Wants(tensor, info); });
  EXPECT_TRUE(steps.ok()) << steps.status();
  if (!steps.ok()) return RuleVerdict::Error("read failed");
  EXPECT_TRUE(reader.finished());
  for (const Step& step : *steps) {
    EXPECT_EQ(step.mode == Mode::kEval ? Mode::kEval : mode, step.mode) << step.global_step;
    RuleVerdict v = r->OnStep(step, reader.info());
    if (v.kind != Kind::kContinue) return v;
  }
  return r->OnTrainingEnd(reader.info());
}

// `rule` as a test name and file name component.
std::string Identifier(std::string rule) {
  for (char& c : rule) {
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return rule;
}

std::string Name(const ::testing::TestParamInfo<GlobalModeCase>& info) {
  return Identifier(info.param.rule);
}

class GlobalModeTest : public ::testing::TestWithParam<GlobalModeCase> {};

TEST_P(GlobalModeTest, GlobalStepsCountAsTrainingSteps) {
  const GlobalModeCase& c = GetParam();
  const std::string base = testing::FreshTempDir(absl::StrCat("global_mode_", Identifier(c.rule)));
  const RuleVerdict train = RunCase(c, Mode::kTrain, base + "/train");
  const RuleVerdict global = RunCase(c, Mode::kGlobal, base + "/global");
  EXPECT_EQ(KindName(train.kind), std::string(KindName(c.expected))) << train.details;
  EXPECT_EQ(KindName(global.kind), std::string(KindName(c.expected))) << global.details;
  EXPECT_THAT(global.details, HasSubstr(c.detail));
  // The same conclusion, told of GLOBAL steps.
  EXPECT_EQ(absl::StrReplaceAll(train.details, {{"TRAIN", "GLOBAL"}}), global.details);
}

// Confusion's and ClassImbalance's labels and predictions.
std::vector<TensorSpec> LabelsAndPredictions(std::vector<double> labels,
                                             std::vector<double> predictions) {
  const int64_t n = static_cast<int64_t>(labels.size());
  return {{"labels", {n}, std::move(labels)}, {"predictions", {n}, std::move(predictions)}};
}

const Kind kIssues = Kind::kIssuesFound;

// One case per built-in tensor rule; each trial shows the problem the rule
// looks for at training steps.
const std::vector<GlobalModeCase>& Cases() {
  static const auto* cases = new std::vector<GlobalModeCase>{
      {"VanishingGradient",
       {},
       [](TrialWriter& w, Mode m) {
         Steps(w, m, 3, [](int i) { return One("gradient/fc1.weight", {i < 2 ? 1e-3 : 1e-12}); });
       },
       kIssues,
       "step 2 (GLOBAL step 2): gradient/fc1.weight mean |x|"},
      {"ExplodingTensor",
       {},
       [](TrialWriter& w, Mode m) {
         Steps(w, m, 3, [](int i) { return One(kLoss, {i == 1 ? NAN : 0.5}); });
       },
       kIssues,
       "step 1 (GLOBAL step 1)"},
      {"LossNotDecreasing",
       {},
       [](TrialWriter& w, Mode m) { Steps(w, m, 12, [](int) { return One(kLoss, {0.7}); }); },
       kIssues,
       "step 10 (GLOBAL step 10)"},
      {"Overfit",
       {},
       [](TrialWriter& w, Mode m) {
         // Passes of 4 training steps (loss 0.1) and 1 EVAL step (loss 1).
         int g = 0;
         for (int pass = 0; pass < 2; ++pass) {
           for (int i = 0; i < 4; ++i, ++g) w.AddStep(g, m, pass * 4 + i, One(kLoss, {0.1}));
           w.AddStep(g, Mode::kEval, pass, One(kLoss, {1.0}));
           ++g;
         }
       },
       kIssues,
       "over 4 training steps"},
      {"Overtraining",
       {},
       [](TrialWriter& w, Mode m) { Steps(w, m, 8, [](int) { return One(kLoss, {0.5}); }); },
       kIssues,
       "step 5 (GLOBAL step 5): training loss 0.5 has not improved"},
      {"DeadRelu",
       {},
       [](TrialWriter& w, Mode m) {
         Steps(w, m, 2, [](int) {
           return One("relu1_output_0", std::vector<double>(32, 0), {4, 8});
         });
       },
       kIssues,
       "step 0 (GLOBAL step 0): relu1_output_0 100% of 8 ReLUs are dead"},
      {"ClassImbalance",
       {{"samples", "40"}},
       [](TrialWriter& w, Mode m) {
         std::vector<double> y(20, 0.0);
         y[0] = 1;  // 19:1.
         Steps(w, m, 3, [y](int) { return LabelsAndPredictions(y, y); });
       },
       kIssues,
       "step 1 (GLOBAL step 1): after 40 labels"},
      {"WeightUpdateRatio",
       {},
       [](TrialWriter& w, Mode m) {
         Steps(w, m, 2, [](int) { return One("fc1.weight", {1, 2}); });
       },
       kIssues,
       "step 1 (GLOBAL step 1): fc1.weight update/weight ratio 0"},
      {"PoorWeightInitialization",
       {},
       [](TrialWriter& w, Mode m) {
         Steps(w, m, 2, [](int) { return One("gradient/fc1.weight", {1e-5, -1e-5, 2e-5, 0}); });
       },
       kIssues,
       "step 0 (GLOBAL step 0): gradients' 95th - 5th percentile"},
      {"SaturatedActivation",
       {},
       [](TrialWriter& w, Mode m) {
         Steps(w, m, 2, [](int) { return One("layer_sigmoid_input", {-30, 20, -25, 18}, {2, 2}); });
       },
       kIssues,
       "step 0 (GLOBAL step 0): layer_sigmoid_input 100% of 2 sigmoid units"},
      {"TensorVariance",
       {{"collection_names", "weights"}, {"max_threshold", "10"}},
       [](TrialWriter& w, Mode m) {
         Steps(w, m, 2, [](int i) { return One("fc1.weight", {-1.0 - 9 * i, 1.0 + 9 * i}); });
       },
       kIssues,
       "step 1 (GLOBAL step 1): fc1.weight variance 100 > max_threshold 10"},
      {"UnchangedTensor",
       {{"collection_names", "weights"}},
       [](TrialWriter& w, Mode m) {
         Steps(w, m, 4, [](int) { return One("fc1.weight", {1, 2}); });
       },
       kIssues,
       "over the last 3 saved GLOBAL steps"},
      {"AllZero",
       {},
       [](TrialWriter& w, Mode m) {
         Steps(w, m, 2, [](int i) { return One("fc1.weight", {0, i == 1 ? 0.0 : 1.0}); });
       },
       kIssues,
       "step 1 (GLOBAL step 1): fc1.weight has 2 of 2 values zero"},
      {"CheckInputImages",
       {{"threshold_samples", "4"}, {"regex", ".*input_0"}},
       [](TrialWriter& w, Mode m) {
         Steps(w, m, 2, [](int) {
           return One("model_input_0", {0.1, -0.1, 100, 100, -0.1, 0.1, 100, 100}, {2, 2, 1, 2});
         });
       },
       kIssues,
       "step 1 (GLOBAL step 1): model_input_0 channel 1 mean 100"},
      {"NLPSequenceRatio",
       {},
       [](TrialWriter& w, Mode m) {
         Steps(w, m, 2, [](int) { return One("embedding0_input_0", {5, 0, 0, 0}, {1, 4}); });
       },
       kIssues,
       "step 0 (GLOBAL step 0): embedding0_input_0 token 0 is 3 of 4 values"},
      {"Confusion",
       {},
       [](TrialWriter& w, Mode m) {
         Steps(w, m, 2, [](int) {
           return LabelsAndPredictions({0, 1, 2, 0, 1, 2}, {0, 0, 2, 0, 1, 2});
         });
       },
       kIssues,
       "step 0 (GLOBAL step 0): labels/predictions confusion"},
      {"FeatureImportanceOverweight",
       {},
       [](TrialWriter& w, Mode m) {
         Steps(w, m, 2, [](int) {
           std::vector<TensorSpec> features;
           const double weights[] = {10, 10, 10, 1, 1};
           for (int f = 0; f < 5; ++f) {
             features.push_back({absl::StrCat("feature_importance/weight/f", f), {}, {weights[f]}});
           }
           return features;
         });
       },
       kIssues,
       "step 0 (GLOBAL step 0): the 3 largest of 5 feature importances"},
      {"TreeDepth",
       {},
       [](TrialWriter& w, Mode m) {
         Steps(w, m, 2, [](int) { return One("trees/Node", {0, 1, 2, 3, 4, 5, 6}); });
       },
       kIssues,
       "step 0 (GLOBAL step 0): trees/Node largest node id 6 gives tree depth 2"},
      {"CreateXgboostReport",
       {},
       [](TrialWriter& w, Mode m) {
         Steps(w, m, 2, [](int) {
           return std::vector<TensorSpec>{{"train-logloss", {}, {0.5}},
                                          {"predictions", {2}, {0.2, 0.8}},
                                          {"labels", {2}, {0, 1}},
                                          {"feature_importance/weight/f0", {}, {1}}};
         });
       },
       Kind::kNoIssuesFound,
       "report written: binary classification, 2 saved rounds"},
      {"StalledTrainingRule",
       {},
       [](TrialWriter& w, Mode m) { Steps(w, m, 3, [](int) { return One(kLoss, {0.5}); }); },
       Kind::kNoIssuesFound,
       "3 steps (3 GLOBAL steps), none stalled"},
      {"SimilarAcrossRuns",
       {{"other_trials", "other-job"}, {"collection_names", "losses"}},
       [](TrialWriter& w, Mode m) {
         Steps(w, m, 3, [](int i) { return One(kLoss, {i == 2 ? 0.5 : 0.7}); });
       },
       kIssues,
       "step 2 (GLOBAL step 2): CrossEntropyLoss_output_0 element 0 is 0.5 here",
       [](TrialWriter& w, Mode m) { Steps(w, m, 3, [](int) { return One(kLoss, {0.7}); }); }},
  };
  return *cases;
}

INSTANTIATE_TEST_SUITE_P(EveryRule, GlobalModeTest, ::testing::ValuesIn(Cases()), Name);

TEST(GlobalModeTableTest, CoversEveryBuiltinTensorRule) {
  std::set<std::string> covered;
  for (const GlobalModeCase& c : Cases()) covered.insert(c.rule);
  const std::vector<std::string> names = BuiltinTensorRuleNames();
  EXPECT_EQ(covered, std::set<std::string>(names.begin(), names.end()));
}

}  // namespace
}  // namespace debugplane::rules_engine
