// Hostile values in requests (issue 16): JSON nested tens of thousands of
// levels deep and values far over their length limit are refused naming the
// field, without being parsed, and never crash the validators.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/jobs/field_violations.h"
#include "core/jobs/json_bounds.h"
#include "core/jobs/profiling_parameters.h"
#include "core/jobs/rule_actions.h"
#include "core/jobs/validation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace debugplane::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kDetailedField[] = "ProfilerConfig.ProfilingParameters.DetailedProfilingConfig";
constexpr char kActionField[] = "DebugRuleConfigurations[0].RuleParameters.action_json";

// `levels` nested JSON arrays around `inner`: "[[[1]]]".
std::string NestedArrays(int levels, absl::string_view inner = "1") {
  return absl::StrCat(std::string(levels, '['), inner, std::string(levels, ']'));
}

// A framework profiling configuration whose StartStep is nested `levels`
// arrays deep (parses as JSON; only the value is wrong).
std::string DeepProfilingConfig(int levels) {
  return absl::StrCat("{\"StartStep\": ", NestedArrays(levels), "}");
}

v1::CreateTrainingJobRequest ValidCreate() {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name("job-1");
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_algorithm_specification()->set_training_input_mode("File");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/output");
  request.mutable_debug_hook_config()->set_s3_output_path("s3://bucket/debug-output");
  auto* rule = request.add_debug_rule_configurations();
  rule->set_rule_configuration_name("Loss");
  rule->set_rule_evaluator_image("builtin");
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = "LossNotDecreasing";
  return request;
}

// The (field, description) pairs of a status's violations.
std::vector<std::string> Violations(const absl::Status& status) {
  std::vector<std::string> out;
  for (const FieldViolation& v : FieldViolationsOf(status)) {
    out.push_back(absl::StrCat(v.field, ": ", v.description));
  }
  return out;
}

TEST(JsonBoundsTest, DepthCountsBracketsOutsideStrings) {
  EXPECT_EQ(JsonNestingDepth(""), 0);
  EXPECT_EQ(JsonNestingDepth("1"), 0);
  EXPECT_EQ(JsonNestingDepth("[]"), 1);
  EXPECT_EQ(JsonNestingDepth("[{}, [[]]]"), 3);
  EXPECT_EQ(JsonNestingDepth(R"({"a": "[[[[{{{{"})"), 1);
  // An escaped quote does not end the string; an escaped backslash does not
  // escape the closing quote.
  EXPECT_EQ(JsonNestingDepth(R"(["\"[[[", "\\", [1]])"), 2);
  // Unbalanced closers never make the count negative.
  EXPECT_EQ(JsonNestingDepth("]]]][["), 2);
}

TEST(JsonBoundsTest, LengthIsCheckedBeforeNesting) {
  EXPECT_TRUE(CheckJsonBounds(NestedArrays(16), {.max_chars = 256, .max_depth = 16}).ok());
  absl::Status deep = CheckJsonBounds(NestedArrays(17), {.max_chars = 256, .max_depth = 16});
  EXPECT_EQ(deep.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(deep.message(), "nests arrays and objects 17 levels deep; at most 16 are allowed");
  // Over the length limit the nesting is not even looked at.
  absl::Status long_and_deep = CheckJsonBounds(NestedArrays(200), {.max_chars = 256});
  EXPECT_EQ(long_and_deep.message(), "is 401 characters long; at most 256 are allowed");
  // Characters, not bytes: 200 two-byte characters fit in 256.
  std::string accents;
  for (int i = 0; i < 200; ++i) accents += "\xc3\xa9";
  EXPECT_TRUE(CheckJsonBounds(absl::StrCat("\"", accents, "\""), {}).ok());
}

TEST(HostileInputTest, DeeplyNestedProfilingConfigIsRefusedWithoutCrashing) {
  // 100,000 levels: before the fix dump() of the value recursed once per
  // level and overflowed the stack.
  absl::Status status =
      CheckProfilingParameter("DetailedProfilingConfig", DeepProfilingConfig(100000));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "is 200016 characters long; at most 256 are allowed");
  // Within the length, the depth limit.
  status = CheckProfilingParameter("PythonProfilingConfig", DeepProfilingConfig(100));
  EXPECT_EQ(status.message(), "nests arrays and objects 101 levels deep; at most 16 are allowed");
  // Within both limits the value is parsed and its error quotes a short
  // excerpt of it.
  status = CheckProfilingParameter(
      "DetailedProfilingConfig", absl::StrCat("{\"StartStep\": \"", std::string(200, 'x'), "\"}"));
  EXPECT_THAT(status.message(), HasSubstr("StartStep must be an integer of at least 0, not \"xxx"));
  EXPECT_THAT(status.message(), HasSubstr("..."));
  EXPECT_LT(status.message().size(), 150u);
}

TEST(HostileInputTest, DeeplyNestedActionJsonIsRefused) {
  absl::StatusOr<std::vector<RuleActionSpec>> actions =
      ParseActionJson(NestedArrays(100000, R"({"name": "stoptraining"})"));
  EXPECT_EQ(actions.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(actions.status().message(), HasSubstr("characters long; at most 256"));
  actions = ParseActionJson(NestedArrays(50, R"({"name": "stoptraining"})"));
  EXPECT_EQ(actions.status().message(),
            "nests arrays and objects 51 levels deep; at most 16 are allowed");
  // The formats smdebug documents still parse.
  EXPECT_TRUE(ParseActionJson(R"([{"name": "stoptraining"}, {"name": "sms", "endpoint": )"
                              R"("+12223334444"}])")
                  .ok());
}

TEST(HostileInputTest, DeeplyNestedProfilingConfigIsRefusedAtCreateNamingTheField) {
  v1::CreateTrainingJobRequest request = ValidCreate();
  (*request.mutable_profiler_config()->mutable_profiling_parameters())["DetailedProfilingConfig"] =
      DeepProfilingConfig(100000);
  const absl::Status status = ValidateCreateTrainingJobRequest(request, {});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  // One violation: the length. The value is not parsed, so nothing else is
  // said about it.
  EXPECT_THAT(Violations(status),
              ElementsAre(absl::StrCat(kDetailedField,
                                       ": has a value of 200016 characters; at most 256 are "
                                       "allowed")));
}

TEST(HostileInputTest, DeeplyNestedProfilingConfigIsRefusedAtUpdateNamingTheField) {
  v1::UpdateTrainingJobRequest update;
  update.set_training_job_name("job-1");
  auto& parameters = *update.mutable_profiler_config()->mutable_profiling_parameters();
  parameters["DetailedProfilingConfig"] = DeepProfilingConfig(100000);
  absl::Status status = ValidateUpdateTrainingJobRequest(update, {});
  EXPECT_THAT(Violations(status),
              ElementsAre(absl::StrCat(kDetailedField,
                                       ": has a value of 200016 characters; at most 256 are "
                                       "allowed")));
  parameters["DetailedProfilingConfig"] = DeepProfilingConfig(120);
  status = ValidateUpdateTrainingJobRequest(update, {});
  EXPECT_THAT(Violations(status),
              ElementsAre(absl::StrCat(kDetailedField,
                                       ": nests arrays and objects 121 levels deep; at most 16 "
                                       "are allowed")));
}

TEST(HostileInputTest, OverLongValuesAreRefusedWithoutBeingParsed) {
  // Not JSON and too long: only the length is reported (before the fix the
  // value was parsed too and "must be a JSON object" came with it).
  v1::CreateTrainingJobRequest request = ValidCreate();
  (*request.mutable_profiler_config()->mutable_profiling_parameters())["DetailedProfilingConfig"] =
      std::string(300, 'x');
  (*request.mutable_debug_rule_configurations(0)->mutable_rule_parameters())["action_json"] =
      std::string(300, 'y');
  const absl::Status status = ValidateCreateTrainingJobRequest(request, {});
  EXPECT_THAT(Violations(status),
              ElementsAre(absl::StrCat(kActionField,
                                       ": has a value of 300 characters; at most 256 are allowed"),
                          absl::StrCat(kDetailedField,
                                       ": has a value of 300 characters; at most 256 are "
                                       "allowed")));
}

TEST(HostileInputTest, OverLongRuleParametersAreNotHandedToTheRuleCheck) {
  ValidationOptions options;
  int checks = 0;
  options.check_rule_parameters = [&](const std::string&, const RuleParameterMap&) {
    ++checks;
    return absl::InvalidArgumentError("checked");
  };
  v1::CreateTrainingJobRequest request = ValidCreate();
  auto& parameters = *request.mutable_debug_rule_configurations(0)->mutable_rule_parameters();
  parameters["tensor_regex"] = std::string(20000, '(');
  const absl::Status status = ValidateCreateTrainingJobRequest(request, options);
  EXPECT_EQ(checks, 0);
  EXPECT_THAT(Violations(status),
              ElementsAre("DebugRuleConfigurations[0].RuleParameters.tensor_regex: has a value "
                          "of 20000 characters; at most 256 are allowed"));
  // Within the limits the check runs and its answer is reported.
  parameters["tensor_regex"] = "(";
  EXPECT_THAT(Violations(ValidateCreateTrainingJobRequest(request, options)),
              ElementsAre("DebugRuleConfigurations[0].RuleParameters: checked"));
  EXPECT_EQ(checks, 1);
}

TEST(HostileInputTest, DeeplyNestedActionJsonIsRefusedAtCreateNamingTheField) {
  v1::CreateTrainingJobRequest request = ValidCreate();
  auto& parameters = *request.mutable_debug_rule_configurations(0)->mutable_rule_parameters();
  parameters["action_json"] = NestedArrays(100000, R"({"name": "stoptraining"})");
  EXPECT_THAT(Violations(ValidateCreateTrainingJobRequest(request, {})),
              ElementsAre(HasSubstr(absl::StrCat(kActionField, ": has a value of "))));
  parameters["action_json"] = NestedArrays(100, R"({"name": "stoptraining"})");
  EXPECT_THAT(Violations(ValidateCreateTrainingJobRequest(request, {})),
              ElementsAre(absl::StrCat(kActionField,
                                       ": nests arrays and objects 101 levels deep; at most 16 "
                                       "are allowed")));
  parameters["action_json"] = R"({"name": "stoptraining"})";
  EXPECT_TRUE(ValidateCreateTrainingJobRequest(request, {}).ok());
}

TEST(HostileInputTest, IntegerProfilingParametersQuoteAShortEscapedExcerpt) {
  const absl::Status status =
      CheckProfilingParameter("RotateMaxFileSizeInBytes", std::string(5000, '\n'));
  EXPECT_THAT(status.message(), HasSubstr("must be a positive integer, not \"\\n\\n"));
  EXPECT_THAT(status.message(), Not(HasSubstr("\n")));
  EXPECT_LT(status.message().size(), 200u);
}

}  // namespace
}  // namespace debugplane::core
