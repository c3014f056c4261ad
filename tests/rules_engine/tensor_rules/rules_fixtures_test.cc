// The built-in rules with their documented defaults over the real smdebug
// trials of tests/data/smdebug, against tests/data/README.md's table.

#include <cctype>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "objectstore/local_object_store.h"
#include "rules_engine/catalog/builtin_rules.h"
#include "rules_engine/rule/rule.h"
#include "rules_engine/smdebug/trial_reader.h"
#include "tests/rules_engine/rule_verdict_names.h"

namespace debugplane::rules_engine {
namespace {

using Kind = RuleVerdict::Kind;
using testing::KindName;

const char kFixtures[] = DP_TEST_DATA_DIR "/smdebug";

// Runs `rule` over the whole fixture trial as the scheduler would: only the
// wanted tensors are decoded, steps in order, OnTrainingEnd unless a step
// already concluded.
RuleVerdict RunRule(const std::string& fixture, const std::string& rule_name,
                    const RuleParameters& params = {}) {
  absl::StatusOr<std::unique_ptr<Rule>> rule = CreateBuiltinRule(rule_name, params);
  EXPECT_TRUE(rule.ok()) << rule.status();
  if (!rule.ok()) return RuleVerdict::Error("create failed");
  TrialReader reader(objectstore::OpenLocalPath(absl::StrCat(kFixtures, "/", fixture)).value());
  Rule* r = rule->get();
  absl::StatusOr<std::vector<Step>> steps = reader.ReadNewSteps(
      [r](const std::string& tensor, const TrialInfo& info) { return r->Wants(tensor, info); });
  EXPECT_TRUE(steps.ok()) << steps.status();
  EXPECT_TRUE(reader.finished());
  if (!steps.ok()) return RuleVerdict::Error("read failed");
  for (const Step& step : *steps) {
    RuleVerdict v = r->OnStep(step, reader.info());
    if (v.kind != Kind::kContinue) return v;
  }
  return r->OnTrainingEnd(reader.info());
}

struct Expectation {
  std::string fixture;
  std::string rule;
  Kind kind;
  RuleParameters params;
};

std::string Name(const ::testing::TestParamInfo<Expectation>& info) {
  std::string n = absl::StrCat(info.param.fixture, "_", info.param.rule, "_",
                               KindName(info.param.kind), info.param.params.empty() ? "" : "_P");
  for (char& c : n) {
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return n;
}

class RulesFixtureTest : public ::testing::TestWithParam<Expectation> {};

TEST_P(RulesFixtureTest, ReachesTheDocumentedOutcome) {
  const Expectation& e = GetParam();
  RuleVerdict v = RunRule(e.fixture, e.rule, e.params);
  EXPECT_EQ(KindName(v.kind), std::string(KindName(e.kind))) << v.details;
  EXPECT_LE(v.details.size(), 1024u);
  if (v.kind == Kind::kIssuesFound) {
    EXPECT_THAT(v.details, ::testing::HasSubstr("step ")) << v.details;
  }
  std::cout << "  [" << e.fixture << "] " << e.rule << ": " << KindName(v.kind) << ": " << v.details
            << "\n";
}

const Kind kIssues = Kind::kIssuesFound;
const Kind kNo = Kind::kNoIssuesFound;

// tests/data/README.md, with the rules' documented defaults.
INSTANTIATE_TEST_SUITE_P(
    Readme, RulesFixtureTest,
    ::testing::Values(Expectation{"healthy", "VanishingGradient", kNo, {}},
                      Expectation{"healthy", "ExplodingTensor", kNo, {}},
                      Expectation{"healthy", "LossNotDecreasing", kNo, {}},
                      Expectation{"healthy", "DeadRelu", kNo, {}},
                      Expectation{"healthy", "ClassImbalance", kNo, {}},
                      Expectation{"healthy", "AllZero", kNo, {}},
                      Expectation{"vanishing_gradient", "VanishingGradient", kIssues, {}},
                      Expectation{"vanishing_gradient", "ExplodingTensor", kNo, {}},
                      Expectation{"exploding_tensor", "ExplodingTensor", kIssues, {}},
                      Expectation{"loss_not_decreasing", "LossNotDecreasing", kIssues, {}},
                      Expectation{"loss_not_decreasing",
                                  "UnchangedTensor",
                                  kIssues,
                                  {{"collection_names", "weights"}}},
                      Expectation{"loss_not_decreasing", "ExplodingTensor", kNo, {}},
                      Expectation{"loss_not_decreasing", "VanishingGradient", kNo, {}},
                      Expectation{"dead_relu", "DeadRelu", kIssues, {}},
                      Expectation{"dead_relu", "ExplodingTensor", kNo, {}},
                      Expectation{"overfit", "Overfit", kIssues, {}},
                      Expectation{"overfit", "ExplodingTensor", kNo, {}}),
    Name);

// Beyond the table: outcomes that follow from what each run did.
INSTANTIATE_TEST_SUITE_P(
    Consequences, RulesFixtureTest,
    ::testing::Values(
        // The healthy run's weights do change.
        Expectation{"healthy", "UnchangedTensor", kNo, {{"collection_names", "weights"}}},
        // lr 0: no update at all.
        Expectation{"loss_not_decreasing", "WeightUpdateRatio", kIssues, {}},
        // Only losses were saved: rules needing gradients or ReLUs say so.
        Expectation{"overfit", "VanishingGradient", Kind::kError, {}},
        Expectation{"overfit", "DeadRelu", Kind::kError, {}},
        // No ReLU in the sigmoid network.
        Expectation{"vanishing_gradient", "DeadRelu", Kind::kError, {}},
        // Explicit modes.
        Expectation{"loss_not_decreasing", "LossNotDecreasing", kIssues, {{"mode", "EVAL"}}},
        Expectation{"healthy", "LossNotDecreasing", kNo, {{"mode", "EVAL"}}},
        // The 12.5% of dead ReLUs in healthy is below 50% but not below 10%.
        Expectation{"healthy", "DeadRelu", kIssues, {{"threshold_layer", "10"}}},
        Expectation{"exploding_tensor", "ExplodingTensor", kIssues, {{"only_nan", "True"}}}),
    Name);

}  // namespace
}  // namespace debugplane::rules_engine
