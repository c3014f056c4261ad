// A job whose debug rules read TensorBoard logs (TensorBoardOutputConfig,
// issue 24): valid without an smdebug DebugHookConfig, its output paths
// checked like the others', and CreateTrainingJobWarnings for each rule whose
// data TensorBoard's scalars and histograms cannot carry.

#include <string>
#include <vector>

#include "core/jobs/field_violations.h"
#include "core/jobs/validation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace debugplane::core {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// A CreateTrainingJob request with TensorBoard logs on `tensorboard_uri` and
// the built-in debug rules `rules` (configuration name = rule name).
v1::CreateTrainingJobRequest TensorBoardJob(const std::vector<std::string>& rules,
                                            const std::string& tensorboard_uri = "s3://b/tb") {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name("tb-job");
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_output_data_config()->set_s3_output_path("s3://b/output");
  request.mutable_tensor_board_output_config()->set_s3_output_path(tensorboard_uri);
  for (const std::string& rule : rules) {
    auto* config = request.add_debug_rule_configurations();
    config->set_rule_configuration_name(rule);
    config->set_rule_evaluator_image("builtin");
    (*config->mutable_rule_parameters())["rule_to_invoke"] = rule;
  }
  return request;
}

std::vector<std::string> FieldsOf(const absl::Status& status) {
  std::vector<std::string> fields;
  for (const FieldViolation& v : FieldViolationsOf(status)) fields.push_back(v.field);
  return fields;
}

// Every collection a rule could ask for is "saved" only if configured: the
// warnings must come from the TensorBoard check, not from this.
ValidationOptions WithRuleCollections() {
  ValidationOptions options;
  options.rule_collections = [](const std::string& rule, const RuleParameterMap&) {
    if (rule == "VanishingGradient") return std::vector<std::string>{"gradients"};
    if (rule == "DeadRelu") return std::vector<std::string>{"relu_output"};
    return std::vector<std::string>{};
  };
  return options;
}

TEST(TensorBoardValidationTest, TensorBoardOutputAndRulesAloneAreAValidJobWithoutWarnings) {
  const v1::CreateTrainingJobRequest request = TensorBoardJob(
      {"ExplodingTensor", "VanishingGradient", "AllZero", "UnchangedTensor", "TensorVariance",
       "LossNotDecreasing", "Overfit", "Overtraining", "StalledTrainingRule"});
  EXPECT_TRUE(ValidateCreateTrainingJobRequest(request, WithRuleCollections()).ok());
  // No "DebugHookConfig is not set" and no collection warnings: the tags
  // name the collections.
  EXPECT_THAT(CreateTrainingJobWarnings(request, WithRuleCollections()), IsEmpty());
}

TEST(TensorBoardValidationTest, TensorBoardOutputConfigNeedsS3OutputPathNamingTheField) {
  v1::CreateTrainingJobRequest request = TensorBoardJob({"ExplodingTensor"}, "");
  EXPECT_THAT(FieldsOf(ValidateCreateTrainingJobRequest(request, {})),
              ElementsAre("TensorBoardOutputConfig.S3OutputPath"));
  request.mutable_tensor_board_output_config()->set_s3_output_path("s3://b/tb");
  request.mutable_tensor_board_output_config()->set_local_path("runs");
  const absl::Status relative = ValidateCreateTrainingJobRequest(request, {});
  EXPECT_THAT(FieldsOf(relative), ElementsAre("TensorBoardOutputConfig.LocalPath"));
  EXPECT_THAT(relative.message(), HasSubstr("not an absolute path"));
  request.mutable_tensor_board_output_config()->set_local_path("/opt/ml/output/tensorboard");
  EXPECT_TRUE(ValidateCreateTrainingJobRequest(request, {}).ok());
}

TEST(TensorBoardValidationTest, EachRuleTensorBoardCannotCarryGetsAWarningNamingIt) {
  const v1::CreateTrainingJobRequest request = TensorBoardJob(
      {"ExplodingTensor", "DeadRelu", "Overfit", "ClassImbalance", "Confusion", "TreeDepth"});
  ASSERT_TRUE(ValidateCreateTrainingJobRequest(request, WithRuleCollections()).ok());
  const std::vector<std::string> warnings =
      CreateTrainingJobWarnings(request, WithRuleCollections());
  ASSERT_THAT(warnings, SizeIs(4));
  EXPECT_THAT(warnings[0], AllOf(HasSubstr("DebugRuleConfigurations[1] (DeadRelu, DeadRelu)"),
                                 HasSubstr("cannot be evaluated on TensorBoard logs"),
                                 HasSubstr("will end in Error"), HasSubstr("DebugHookConfig")));
  EXPECT_THAT(warnings[1], HasSubstr("DebugRuleConfigurations[3] (ClassImbalance"));
  EXPECT_THAT(warnings[2], HasSubstr("DebugRuleConfigurations[4] (Confusion"));
  EXPECT_THAT(warnings[3], HasSubstr("DebugRuleConfigurations[5] (TreeDepth"));
}

// A DebugHookConfig that only configures the collections of the TensorBoard
// logs names their location: the job still has no smdebug trial.
TEST(TensorBoardValidationTest, AHookConfigForCollectionsOnlyIsAcceptedAndIsNoSmdebugTrial) {
  v1::CreateTrainingJobRequest request = TensorBoardJob({"VanishingGradient", "DeadRelu"});
  auto* hook = request.mutable_debug_hook_config();
  hook->set_s3_output_path("s3://b/tb/");
  auto* collection = hook->add_collection_configurations();
  collection->set_collection_name("gradients");
  (*collection->mutable_collection_parameters())["include_regex"] = "grad_norm";
  ASSERT_TRUE(ValidateCreateTrainingJobRequest(request, WithRuleCollections()).ok());
  const std::vector<std::string> warnings =
      CreateTrainingJobWarnings(request, WithRuleCollections());
  ASSERT_THAT(warnings, SizeIs(1));
  EXPECT_THAT(warnings[0], HasSubstr("(DeadRelu, DeadRelu) cannot be evaluated on TensorBoard logs"));
}

// With an smdebug trial beside the TensorBoard logs, a rule TensorBoard
// cannot carry reads smdebug's tensors: the collection warnings apply to it.
TEST(TensorBoardValidationTest, WithAnSmdebugTrialTooOnlyItsMissingCollectionsAreWarnedOf) {
  v1::CreateTrainingJobRequest request = TensorBoardJob({"VanishingGradient", "DeadRelu"});
  request.mutable_debug_hook_config()->set_s3_output_path("s3://b/tensors");
  const std::vector<std::string> warnings =
      CreateTrainingJobWarnings(request, WithRuleCollections());
  ASSERT_THAT(warnings, SizeIs(1));
  EXPECT_THAT(warnings[0], AllOf(HasSubstr("(DeadRelu, DeadRelu) reads the 'relu_output'"),
                                 HasSubstr("CollectionConfigurations")));
}

TEST(TensorBoardValidationTest, RulesWithNeitherOutputSayBothWaysToGiveTheirData) {
  v1::CreateTrainingJobRequest request = TensorBoardJob({"ExplodingTensor"});
  request.clear_tensor_board_output_config();
  const std::vector<std::string> warnings = CreateTrainingJobWarnings(request, {});
  ASSERT_THAT(warnings, SizeIs(1));
  EXPECT_THAT(warnings[0], AllOf(HasSubstr("TensorBoardOutputConfig"),
                                 HasSubstr("DebugHookConfig"), HasSubstr("end in Error")));
}

}  // namespace
}  // namespace debugplane::core
