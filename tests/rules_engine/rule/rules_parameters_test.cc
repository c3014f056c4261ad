#include <string>

#include "absl/strings/str_cat.h"
#include "core/jobs/field_violations.h"
#include "core/jobs/validation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rules_engine/catalog/builtin_rules.h"
#include "rules_engine/rule/rule.h"
#include "rules_engine/rule/rule_parameters.h"
#include "rules_engine/scheduling/validation_hooks.h"
#include "rules_engine/smdebug/python_regex.h"

namespace debugplane::rules_engine {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(RuleParameterReaderTest, TypedValuesAndDefaults) {
  RuleParameters params = {{"f", "1e-7"}, {"i", "10.0"},  {"b", "False"}, {"l", "['a', 'b']"},
                           {"n", "None"}, {"fl", "3, 0"}, {"s", "TRAIN"}, {"rule_to_invoke", "X"}};
  RuleParameterReader p("X", params);
  EXPECT_DOUBLE_EQ(p.Float("f", 0), 1e-7);
  EXPECT_EQ(p.Int("i", 0), 10);
  EXPECT_FALSE(p.Bool("b", true));
  EXPECT_EQ(p.List("l"), (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(p.OptionalFloat("n").has_value());
  EXPECT_EQ(p.FloatList("fl", {}), (std::vector<double>{3, 0}));
  EXPECT_EQ(p.String("s", "", {"TRAIN", "EVAL"}), "TRAIN");
  EXPECT_EQ(p.Float("absent", 2.5), 2.5);
  EXPECT_TRUE(p.status().ok()) << p.status();
}

TEST(RuleParameterReaderTest, RegexListsSplitOnlyBetweenPatterns) {
  RuleParameters params = {{"counted", "a{1,3}, [x,y]z, (p|q,r)"},
                           {"escaped", "a\\,b, c"},
                           {"class_first", "[ab]c,d"},
                           {"literal", "['a{1,3}', \"b,c\"]"},
                           {"plain", "x,y"}};
  RuleParameterReader p("X", params);
  EXPECT_EQ(p.RegexList("counted"), (std::vector<std::string>{"a{1,3}", "[x,y]z", "(p|q,r)"}));
  EXPECT_EQ(p.RegexList("escaped"), (std::vector<std::string>{"a\\,b", "c"}));
  EXPECT_EQ(p.RegexList("class_first"), (std::vector<std::string>{"[ab]c", "d"}));
  EXPECT_EQ(p.RegexList("literal"), (std::vector<std::string>{"a{1,3}", "b,c"}));
  EXPECT_EQ(p.RegexList("plain"), (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(p.status().ok()) << p.status();
}

TEST(RuleParameterReaderTest, QuotedListItemsKeepTheirCommas) {
  RuleParameterReader p("X", {{"l", "['a,b', 'c']"}});
  EXPECT_EQ(p.List("l"), (std::vector<std::string>{"a,b", "c"}));
  EXPECT_TRUE(p.status().ok()) << p.status();
}

TEST(RuleParameterReaderTest, BadValuesNameTheParameter) {
  struct Case {
    std::string value;
    std::string message;
  };
  {
    RuleParameterReader p("R", {{"threshold", "abc"}});
    p.Float("threshold", 1);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(p.status().message(),
                HasSubstr("parameter 'threshold' must be a number, got 'abc'"));
  }
  {
    RuleParameterReader p("R", {{"n", "1.5"}});
    p.Int("n", 1);
    EXPECT_THAT(p.status().message(), HasSubstr("parameter 'n' must be an integer, got '1.5'"));
  }
  {
    RuleParameterReader p("R", {{"b", "yes"}});
    p.Bool("b", true);
    EXPECT_THAT(p.status().message(), HasSubstr("parameter 'b' must be True or False"));
  }
  {
    RuleParameterReader p("R", {{"r", "a(b"}});
    p.RegexList("r");
    EXPECT_THAT(p.status().message(), HasSubstr("parameter 'r' has an invalid regular"));
  }
  {
    RuleParameterReader p("R", {{"x", "-1"}});
    p.Float("x", 1, 0);
    EXPECT_THAT(p.status().message(), HasSubstr("parameter 'x' must be between 0"));
  }
}

TEST(RuleParameterReaderTest, UnknownParameterIsRejectedReservedOnesIgnored) {
  RuleParameterReader p(
      "R",
      {{"thresh", "1"}, {"rule_to_invoke", "R"}, {"action_json", "[]"}, {"base_trial", "job"}});
  p.Float("threshold", 1);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(),
              AllOf(HasSubstr("unknown parameter 'thresh'"), HasSubstr("allowed: threshold")));
}

TEST(RuleParameterReaderTest, LeadingNegativeLookaheadIsSupportedAndMatchesFromTheStart) {
  EXPECT_EQ(RegexError("^(?!gradient).*weight"), "");
  EXPECT_TRUE(RegexMatchPrefix("^(?!gradient).*weight", "fc1.weight"));
  EXPECT_FALSE(RegexMatchPrefix("^(?!gradient).*weight", "gradient/fc1.weight"));
  // re.match: anchored at the start only.
  EXPECT_TRUE(RegexMatchPrefix("gradient", "gradient/x"));
  EXPECT_FALSE(RegexMatchPrefix("fc1", "gradient/fc1"));
  EXPECT_NE(RegexError("a(b"), "");
}

TEST(CreateBuiltinRuleTest, UnknownAndNonTensorRules) {
  EXPECT_EQ(CreateBuiltinRule("NoSuchRule", {}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(CreateBuiltinRule("CPUBottleneck", {}).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(BuiltinTensorRuleNames().size(), 21u);  // CreateXgboostReport is one.
}

TEST(CreateBuiltinRuleTest, EveryRuleBuildsWithItsDefaults) {
  for (const std::string& name : BuiltinTensorRuleNames()) {
    RuleParameters params;
    // The rules whose doc requires a selection or a value.
    if (name == "TensorVariance")
      params = {{"collection_names", "weights"}, {"max_threshold", "1"}};
    if (name == "UnchangedTensor") params = {{"collection_names", "weights"}};
    if (name == "SimilarAcrossRuns") params = {{"other_trials", "job-2"}};
    EXPECT_TRUE(ValidateBuiltinRuleParameters(name, params).ok()) << name;
    if (name == "SimilarAcrossRuns") continue;  // Needs a RuleContext.
    absl::StatusOr<std::unique_ptr<Rule>> rule = CreateBuiltinRule(name, params);
    ASSERT_TRUE(rule.ok()) << name << ": " << rule.status();
    EXPECT_EQ((*rule)->name(), name);
    // Unknown parameters are rejected by every rule, naming the parameter.
    params["bogus_param"] = "1";
    absl::Status s = ValidateBuiltinRuleParameters(name, params);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(s.message(), HasSubstr("'bogus_param'")) << name;
  }
}

TEST(CreateBuiltinRuleTest, BadValuesPerRuleNameTheParameter) {
  struct Case {
    std::string rule;
    RuleParameters params;
    std::string parameter;
  };
  const Case cases[] = {
      {"VanishingGradient", {{"threshold", "abc"}}, "threshold"},
      {"ExplodingTensor", {{"only_nan", "maybe"}}, "only_nan"},
      {"ExplodingTensor", {{"tensor_regex", "(("}}, "tensor_regex"},
      {"LossNotDecreasing", {{"diff_percent", "100"}}, "diff_percent"},
      {"LossNotDecreasing", {{"mode", "TRAINING"}}, "mode"},
      {"LossNotDecreasing", {{"use_losses_collection", "False"}}, "collection_names"},
      {"LossNotDecreasing", {{"num_steps", "0"}}, "num_steps"},
      {"Overfit", {{"patience", "x"}}, "patience"},
      {"Overtraining", {{"delta", "-1"}}, "delta"},
      {"DeadRelu", {{"threshold_layer", "150"}}, "threshold_layer"},
      {"ClassImbalance", {{"samples", "many"}}, "samples"},
      {"WeightUpdateRatio", {{"num_steps", "0"}}, "num_steps"},
      {"WeightUpdateRatio", {{"small_threshold", "20"}}, "small_threshold"},
      {"PoorWeightInitialization", {{"steps", "ten"}}, "steps"},
      {"SaturatedActivation", {{"threshold_tanh_min", "10"}}, "threshold_tanh_min"},
      {"TensorVariance", {{"max_threshold", "1"}}, "collection_names"},
      {"TensorVariance", {{"collection_names", "weights"}}, "max_threshold"},
      {"UnchangedTensor", {}, "collection_names"},
      {"UnchangedTensor", {{"collection_names", "w"}, {"num_steps", "1"}}, "num_steps"},
      {"AllZero", {{"threshold", "101"}}, "threshold"},
      {"CheckInputImages", {{"channel", "0"}}, "channel"},
      {"NLPSequenceRatio", {{"token_values", "3, 0"}}, "token_thresholds_percent"},
      {"Confusion", {{"category_no", "1"}}, "category_no"},
      {"Confusion", {{"min_diag", "1.5"}}, "min_diag"},
      {"FeatureImportanceOverweight", {{"nfeatures", "0"}}, "nfeatures"},
      {"TreeDepth", {{"depth", "deep"}}, "depth"},
      {"StalledTrainingRule", {{"threshold", "0"}}, "threshold"},
      {"SimilarAcrossRuns", {}, "other_trials"},
  };
  for (const Case& c : cases) {
    absl::Status s = ValidateBuiltinRuleParameters(c.rule, c.params);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.rule << " " << c.parameter;
    EXPECT_THAT(s.message(), HasSubstr("'" + c.parameter + "'")) << c.rule << ": " << s;
  }
}

TEST(CreateBuiltinRuleTest, SimilarAcrossRunsWithoutLookupIsUnimplemented) {
  absl::Status s = CreateBuiltinRule("SimilarAcrossRuns", {{"other_trials", "job-2"}}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("other_trial"));
}

// --- Hostile regular expressions (issue 16) ---------------------------------------------

// "(?=((((a))))" with `levels` groups: a lookahead around deeply nested
// groups, which made the old std::regex fallback overflow the stack.
std::string NestedGroupsLookahead(int levels) {
  return absl::StrCat("(?=", std::string(levels, '('), "a", std::string(levels, ')'), ")");
}

TEST(HostileRegexTest, NestedGroupsLookaheadIsRefusedNamingEveryRegexParameter) {
  struct Case {
    std::string rule;
    std::string parameter;
    RuleParameters extra;
  };
  const Case cases[] = {
      {"ExplodingTensor", "tensor_regex", {}},
      {"ClassImbalance", "labels_regex", {}},
      {"ClassImbalance", "predictions_regex", {}},
      {"CheckInputImages", "regex", {}},
      {"PoorWeightInitialization", "activation_inputs_regex", {}},
      {"TensorVariance", "tensor_regex", {{"max_threshold", "1"}}},
  };
  for (const Case& c : cases) {
    for (int levels : {1500, 20000}) {
      RuleParameters params = c.extra;
      params[c.parameter] = NestedGroupsLookahead(levels);
      const absl::Status s = ValidateBuiltinRuleParameters(c.rule, params);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.rule << " " << c.parameter;
      EXPECT_THAT(s.message(),
                  AllOf(HasSubstr(absl::StrCat(c.rule, ": parameter '", c.parameter,
                                               "' has an invalid regular expression '(?=(((")),
                        HasSubstr(levels == 1500 ? "invalid perl operator: (?="
                                                 : "bytes long; at most 4096 are allowed")))
          << s;
      EXPECT_LT(s.message().size(), 600u) << s;
    }
  }
}

TEST(HostileRegexTest, RefusedPatternsDoNotGrowTheSharedCache) {
  const size_t before = RegexCache::Shared().entries();
  for (int i = 0; i < 5000; ++i) {
    // Distinct 20 KB patterns, as in the report (7.3 GB after 5,000 Creates).
    RuleParameterReader p("ExplodingTensor",
                          {{"tensor_regex", absl::StrCat(i, NestedGroupsLookahead(10000))}});
    p.RegexList("tensor_regex");
    ASSERT_FALSE(p.status().ok());
    EXPECT_NE(RegexError(absl::StrCat("(?<=", i, ")x")), "");
  }
  EXPECT_EQ(RegexCache::Shared().entries(), before);
}

v1::CreateTrainingJobRequest RequestWithTensorRegex(const std::string& tensor_regex) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name("job-1");
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_algorithm_specification()->set_training_input_mode("File");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/output");
  request.mutable_debug_hook_config()->set_s3_output_path("s3://bucket/debug-output");
  auto* rule = request.add_debug_rule_configurations();
  rule->set_rule_configuration_name("Exploding");
  rule->set_rule_evaluator_image("builtin");
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = "ExplodingTensor";
  (*rule->mutable_rule_parameters())["tensor_regex"] = tensor_regex;
  return request;
}

TEST(HostileRegexTest, CreateTrainingJobRefusesWhatRe2RefusesNamingTheParameter) {
  core::ValidationOptions options;
  InstallRuleValidation(&options);
  EXPECT_TRUE(
      core::ValidateCreateTrainingJobRequest(RequestWithTensorRegex("^(?!gradient).*"), options)
          .ok());
  const absl::Status refused = core::ValidateCreateTrainingJobRequest(
      RequestWithTensorRegex(NestedGroupsLookahead(100)), options);
  std::vector<std::string> violations;
  for (const core::FieldViolation& v : core::FieldViolationsOf(refused)) {
    violations.push_back(absl::StrCat(v.field, ": ", v.description));
  }
  EXPECT_THAT(violations,
              ElementsAre(AllOf(HasSubstr("DebugRuleConfigurations[0].RuleParameters: "
                                          "ExplodingTensor: parameter 'tensor_regex' has an "
                                          "invalid regular expression"),
                                HasSubstr("invalid perl operator: (?="))));
  // A 20 KB pattern is refused for its length and never compiled.
  const size_t before = RegexCache::Shared().entries();
  const absl::Status too_long = core::ValidateCreateTrainingJobRequest(
      RequestWithTensorRegex(absl::StrCat("x", NestedGroupsLookahead(10000))), options);
  EXPECT_THAT(too_long.message(), HasSubstr("RuleParameters.tensor_regex: has a value of 20006 "
                                            "characters; at most 256 are allowed"));
  EXPECT_EQ(RegexCache::Shared().entries(), before);
}

}  // namespace
}  // namespace debugplane::rules_engine
