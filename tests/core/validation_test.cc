#include "core/jobs/validation.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/jobs/field_violations.h"
#include "core/jobs/rule_catalog.h"
#include "gmock/gmock.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace debugplane::core {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;

constexpr char kRulesImage[] =
    "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest";

// The Debugger guide's complete create-training-job template
// (tests/data/README.md) with its `//` comment lines removed, so that it is JSON.
std::string CliTemplateJson() {
  const fs::path file = fs::path(DP_TEST_DATA_DIR) / "sagemaker/create-training-job-template.jsonc";
  std::ifstream in(file);
  EXPECT_TRUE(in.good()) << "cannot read " << file;
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string json;
  for (absl::string_view line : absl::StrSplit(buffer.str(), '\n')) {
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "//")) continue;
    absl::StrAppend(&json, line, "\n");
  }
  return json;
}

v1::CreateTrainingJobRequest CliTemplateRequest() {
  v1::CreateTrainingJobRequest request;
  auto status = google::protobuf::util::JsonStringToMessage(CliTemplateJson(), &request);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return request;
}

// The field paths of a status's violations, in order.
std::vector<std::string> Fields(const absl::Status& status) {
  std::vector<std::string> fields;
  for (const FieldViolation& v : FieldViolationsOf(status)) fields.push_back(v.field);
  return fields;
}

// The description of the violation of `field` ("" if none).
std::string DescriptionOf(const absl::Status& status, const std::string& field) {
  for (const FieldViolation& v : FieldViolationsOf(status)) {
    if (v.field == field) return v.description;
  }
  return "";
}

std::string Repeat(char c, size_t n) { return std::string(n, c); }

class ValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::path(::testing::TempDir()) / "dp-validation-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    base_ = fs::canonical(pattern);
    root_ = base_ / "data";
    fs::create_directories(root_);
    fs::create_directories(base_ / "outside");
    options_.data_roots = {root_};
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(base_, ignored);
  }

  // A small valid request: one debug rule, one profiler rule.
  v1::CreateTrainingJobRequest Valid() {
    v1::CreateTrainingJobRequest request;
    request.set_training_job_name("job-1");
    request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
    request.mutable_algorithm_specification()->set_training_input_mode("File");
    request.mutable_output_data_config()->set_s3_output_path("s3://bucket/output");
    request.mutable_debug_hook_config()->set_s3_output_path("s3://bucket/debug-output");
    AddDebugRule(request, "Loss", "LossNotDecreasing");
    AddProfilerRule(request, "Report", "ProfilerReport");
    return request;
  }
  static v1::DebugRuleConfiguration* AddDebugRule(v1::CreateTrainingJobRequest& request,
                                                  const std::string& name,
                                                  const std::string& rule) {
    auto* config = request.add_debug_rule_configurations();
    config->set_rule_configuration_name(name);
    config->set_rule_evaluator_image(kRulesImage);
    (*config->mutable_rule_parameters())["rule_to_invoke"] = rule;
    return config;
  }
  template <typename Request>
  static v1::ProfilerRuleConfiguration* AddProfilerRule(Request& request, const std::string& name,
                                                        const std::string& rule) {
    auto* config = request.add_profiler_rule_configurations();
    config->set_rule_configuration_name(name);
    config->set_rule_evaluator_image("builtin");
    (*config->mutable_rule_parameters())["rule_to_invoke"] = rule;
    return config;
  }

  absl::Status Validate(const v1::CreateTrainingJobRequest& request) {
    return ValidateCreateTrainingJobRequest(request, options_);
  }
  absl::Status ValidateUpdate(const v1::UpdateTrainingJobRequest& request) {
    return ValidateUpdateTrainingJobRequest(request, options_);
  }
  // Expects exactly one violation, of `field`, and returns its description.
  std::string OnlyViolation(const absl::Status& status, const std::string& field) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(Fields(status), ElementsAre(field)) << status;
    return DescriptionOf(status, field);
  }

  fs::path base_, root_;
  ValidationOptions options_;
};

// --- The documented template -------------------------------------------------------

TEST_F(ValidationTest, CliTemplateFromTheGuideIsValid) {
  v1::CreateTrainingJobRequest request = CliTemplateRequest();
  // Parsed as intended, not just as an empty message.
  ASSERT_EQ(request.training_job_name(), "debugger-aws-cli-test");
  ASSERT_EQ(request.debug_rule_configurations_size(), 1);
  ASSERT_EQ(request.profiler_rule_configurations_size(), 1);
  EXPECT_EQ(request.profiler_config().profiling_interval_in_milliseconds(), 500);
  EXPECT_EQ(request.profiler_config().profiling_parameters_size(), 4);
  EXPECT_EQ(request.resource_config().instance_type(), "ml.p3.8xlarge");
  EXPECT_TRUE(Validate(request).ok()) << Validate(request);
  // Object-store paths need no data roots.
  EXPECT_TRUE(ValidateCreateTrainingJobRequest(request, {}).ok());
}

TEST_F(ValidationTest, CliTemplateWithLocalPaths) {
  v1::CreateTrainingJobRequest request = CliTemplateRequest();
  request.mutable_output_data_config()->set_s3_output_path((root_ / "output").string());
  request.mutable_debug_hook_config()->set_s3_output_path("file://" +
                                                          (root_ / "debug-output").string());
  request.mutable_profiler_config()->set_s3_output_path((root_ / "profiler-output").string());
  EXPECT_TRUE(Validate(request).ok()) << Validate(request);

  request.mutable_debug_hook_config()->set_s3_output_path((base_ / "outside" / "t").string());
  request.mutable_profiler_config()->set_s3_output_path(root_.string() + "/../outside");
  absl::Status status = Validate(request);
  EXPECT_THAT(Fields(status),
              ElementsAre("DebugHookConfig.S3OutputPath", "ProfilerConfig.S3OutputPath"));
  EXPECT_THAT(DescriptionOf(status, "DebugHookConfig.S3OutputPath"), HasSubstr(root_.string()));
  EXPECT_THAT(DescriptionOf(status, "ProfilerConfig.S3OutputPath"), HasSubstr("'..'"));
}

// --- Top-level members ------------------------------------------------------------

TEST_F(ValidationTest, SmallRequestIsValid) { EXPECT_TRUE(Validate(Valid()).ok()); }

TEST_F(ValidationTest, TrainingJobNameLengthAndPattern) {
  for (const std::string& ok :
       std::vector<std::string>{"a", "A1", "a-b", "a--b", "job-2024-01", Repeat('a', 63)}) {
    EXPECT_TRUE(ValidateTrainingJobName(ok).ok()) << ok;
  }
  EXPECT_THAT(OnlyViolation(ValidateTrainingJobName(Repeat('a', 64)), "TrainingJobName"),
              HasSubstr("64 characters long; at most 63"));
  EXPECT_THAT(OnlyViolation(ValidateTrainingJobName(""), "TrainingJobName"), HasSubstr("required"));
  for (const std::string bad : {"-a", "a-", "a_b", "a.b", "a b", "ü"}) {
    EXPECT_THAT(OnlyViolation(ValidateTrainingJobName(bad), "TrainingJobName"),
                HasSubstr("must match [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"))
        << bad;
  }
  EXPECT_THAT(Fields(ValidateTrainingJobName("a_b", "Other")), ElementsAre("Other"));

  auto request = Valid();
  request.set_training_job_name(Repeat('x', 63));
  EXPECT_TRUE(Validate(request).ok());
  request.set_training_job_name(Repeat('x', 64));
  OnlyViolation(Validate(request), "TrainingJobName");
}

TEST_F(ValidationTest, RoleArn) {
  auto request = Valid();
  request.clear_role_arn();
  EXPECT_THAT(OnlyViolation(Validate(request), "RoleArn"), HasSubstr("required"));
  request.set_role_arn("arn:aws:iam::1:role/x");  // 20 characters but no 12-digit account.
  EXPECT_THAT(OnlyViolation(Validate(request), "RoleArn"), HasSubstr("must match"));
  request.set_role_arn("arn:aws:iam::111122");  // 19 characters.
  EXPECT_THAT(OnlyViolation(Validate(request), "RoleArn"), HasSubstr("20-2048"));
  request.set_role_arn("arn:aws-cn:iam::111122223333:role/a");
  EXPECT_TRUE(Validate(request).ok());
  const std::string prefix = "arn:aws:iam::111122223333:role/";
  request.set_role_arn(prefix + Repeat('r', 2048 - prefix.size()));
  EXPECT_TRUE(Validate(request).ok());
  request.set_role_arn(prefix + Repeat('r', 2049 - prefix.size()));
  EXPECT_THAT(OnlyViolation(Validate(request), "RoleArn"), HasSubstr("at most 2048"));
}

TEST_F(ValidationTest, OutputDataConfigIsRequired) {
  auto request = Valid();
  request.clear_output_data_config();
  OnlyViolation(Validate(request), "OutputDataConfig");
  request.mutable_output_data_config();
  EXPECT_THAT(OnlyViolation(Validate(request), "OutputDataConfig.S3OutputPath"),
              HasSubstr("required"));
  request.mutable_output_data_config()->set_s3_output_path("output");
  EXPECT_THAT(OnlyViolation(Validate(request), "OutputDataConfig.S3OutputPath"),
              HasSubstr("relative"));
  request.mutable_output_data_config()->set_s3_output_path("s3://b/o");
  request.mutable_output_data_config()->set_compression_type("zip");
  EXPECT_THAT(OnlyViolation(Validate(request), "OutputDataConfig.CompressionType"),
              HasSubstr("use one of GZIP, NONE"));
}

TEST_F(ValidationTest, TrainingInputMode) {
  auto request = Valid();
  for (const char* mode : {"Pipe", "File", "FastFile"}) {
    request.mutable_algorithm_specification()->set_training_input_mode(mode);
    EXPECT_TRUE(Validate(request).ok()) << mode;
  }
  request.mutable_algorithm_specification()->set_training_input_mode("file");
  EXPECT_THAT(OnlyViolation(Validate(request), "AlgorithmSpecification.TrainingInputMode"),
              HasSubstr("'file' is not allowed; use one of Pipe, File, FastFile"));
  request.mutable_algorithm_specification()->clear_training_input_mode();
  EXPECT_THAT(OnlyViolation(Validate(request), "AlgorithmSpecification.TrainingInputMode"),
              HasSubstr("required"));
  request.clear_algorithm_specification();
  EXPECT_TRUE(Validate(request).ok());
}

TEST_F(ValidationTest, HyperParametersLimits) {
  auto request = Valid();
  auto& params = *request.mutable_hyper_parameters();
  for (int i = 0; i < 100; ++i) params[absl::StrCat("p", i)] = "v";
  EXPECT_TRUE(Validate(request).ok());
  params["p100"] = "v";
  EXPECT_THAT(OnlyViolation(Validate(request), "HyperParameters"),
              HasSubstr("101 entries; at most 100"));

  request = Valid();
  auto& more = *request.mutable_hyper_parameters();
  more[Repeat('k', 256)] = Repeat('v', 2500);
  EXPECT_TRUE(Validate(request).ok());
  more["long_value"] = Repeat('v', 2501);
  EXPECT_THAT(OnlyViolation(Validate(request), "HyperParameters.long_value"),
              HasSubstr("2501 characters; at most 2500"));
  more.erase("long_value");
  more[Repeat('k', 257)] = "v";
  absl::Status status = Validate(request);
  ASSERT_THAT(Fields(status), SizeIs(1));
  EXPECT_THAT(Fields(status)[0], HasSubstr("HyperParameters[\"kkkk"));
  EXPECT_THAT(FieldViolationsOf(status)[0].description, HasSubstr("257 characters; at most 256"));
}

TEST_F(ValidationTest, EnvironmentLimits) {
  auto request = Valid();
  auto& env = *request.mutable_environment();
  for (int i = 0; i < 100; ++i) env[absl::StrCat("VAR_", i)] = "x";
  env[Repeat('K', 512)] = Repeat('v', 512);
  env.erase("VAR_0");
  EXPECT_TRUE(Validate(request).ok()) << Validate(request);
  env["VAR_0"] = "x";
  OnlyViolation(Validate(request), "Environment");

  request = Valid();
  auto& bad = *request.mutable_environment();
  bad["1ABC"] = "x";
  bad["A-B"] = "x";
  bad["OK"] = Repeat('v', 513);
  bad[Repeat('K', 513)] = "x";
  bad[""] = "x";
  absl::Status status = Validate(request);
  EXPECT_THAT(Fields(status),
              ElementsAre("Environment[\"\"]", "Environment[\"1ABC\"]", "Environment[\"A-B\"]",
                          HasSubstr("Environment[\"KKK"), "Environment.OK"));
  EXPECT_THAT(DescriptionOf(status, "Environment[\"1ABC\"]"),
              HasSubstr("must match [a-zA-Z_][a-zA-Z0-9_]*"));
  EXPECT_THAT(DescriptionOf(status, "Environment.OK"), HasSubstr("at most 512"));
}

TEST_F(ValidationTest, TagsLimitsAndUnicodePattern) {
  auto request = Valid();
  for (int i = 0; i < 50; ++i) {
    auto* tag = request.add_tags();
    tag->set_key(absl::StrCat("team-", i));
    tag->set_value("ml platform");
  }
  // Letters and digits of any script, spaces and _.:/=+-@ are allowed.
  request.mutable_tags(0)->set_key("Équipe 名前 ٣ _.:/=+-@");
  request.mutable_tags(1)->set_key(Repeat('k', 128));
  request.mutable_tags(1)->set_value(Repeat('v', 256));
  EXPECT_TRUE(Validate(request).ok()) << Validate(request);
  request.add_tags()->set_key("one-too-many");
  EXPECT_THAT(OnlyViolation(Validate(request), "Tags"), HasSubstr("51 tags; at most 50"));

  request = Valid();
  request.add_tags()->set_key("");
  request.add_tags()->set_key(Repeat('k', 129));
  auto* bad_value = request.add_tags();
  bad_value->set_key("v");
  bad_value->set_value(Repeat('v', 257));
  auto* bad_chars = request.add_tags();
  bad_chars->set_key("cost*center");
  bad_chars->set_value("a#b");
  request.add_tags()->set_key("v");  // Duplicate of Tags[2].
  absl::Status status = Validate(request);
  EXPECT_THAT(Fields(status), ElementsAre("Tags[0].Key", "Tags[1].Key", "Tags[2].Value",
                                          "Tags[3].Key", "Tags[3].Value", "Tags[4].Key"));
  EXPECT_THAT(DescriptionOf(status, "Tags[3].Key"), HasSubstr("\\p{L}"));
  EXPECT_THAT(DescriptionOf(status, "Tags[4].Key"), HasSubstr("Tags[2]"));
}

TEST_F(ValidationTest, InputDataConfig) {
  auto request = Valid();
  for (int i = 0; i < 20; ++i) {
    auto* channel = request.add_input_data_config();
    channel->set_channel_name(absl::StrCat("train.", i, "-x_y"));
    auto* s3 = channel->mutable_data_source()->mutable_s3_data_source();
    s3->set_s3_data_type("S3Prefix");
    s3->set_s3_uri("s3://bucket/train");
  }
  EXPECT_TRUE(Validate(request).ok()) << Validate(request);
  *request.add_input_data_config() = request.input_data_config(0);
  request.mutable_input_data_config(20)->set_channel_name("extra");
  EXPECT_THAT(OnlyViolation(Validate(request), "InputDataConfig"),
              HasSubstr("21 channels; at most 20"));

  request = Valid();
  request.add_input_data_config()->set_channel_name("bad name");
  absl::Status status = Validate(request);
  EXPECT_THAT(Fields(status),
              ElementsAre("InputDataConfig[0].ChannelName", "InputDataConfig[0].DataSource"));
}

TEST_F(ValidationTest, StoppingConditionBoundaries) {
  auto request = Valid();
  auto* stop = request.mutable_stopping_condition();
  stop->set_max_runtime_in_seconds(1);
  stop->set_max_pending_time_in_seconds(7200);
  EXPECT_TRUE(Validate(request).ok());
  stop->set_max_pending_time_in_seconds(2419200);
  EXPECT_TRUE(Validate(request).ok());
  stop->set_max_pending_time_in_seconds(2419201);
  EXPECT_THAT(OnlyViolation(Validate(request), "StoppingCondition.MaxPendingTimeInSeconds"),
              HasSubstr("7200-2419200"));
  stop->set_max_pending_time_in_seconds(7199);
  OnlyViolation(Validate(request), "StoppingCondition.MaxPendingTimeInSeconds");
  stop->clear_max_pending_time_in_seconds();
  stop->set_max_runtime_in_seconds(0);
  EXPECT_THAT(OnlyViolation(Validate(request), "StoppingCondition.MaxRuntimeInSeconds"),
              HasSubstr("use 1 or more"));
  stop->set_max_runtime_in_seconds(3600);
  stop->set_max_wait_time_in_seconds(1800);
  OnlyViolation(Validate(request), "StoppingCondition.MaxWaitTimeInSeconds");
}

TEST_F(ValidationTest, ResourceConfig) {
  auto request = Valid();
  auto* resources = request.mutable_resource_config();
  resources->set_instance_type("ml.g4dn.xlarge");
  resources->set_instance_count(0);
  resources->set_volume_size_in_gb(30);
  EXPECT_TRUE(Validate(request).ok());
  for (const char* bad : {"p3.2xlarge", "ml.p3", "ml..x", "ML.P3.2XLARGE", "ml.p3.2xlarge "}) {
    resources->set_instance_type(bad);
    EXPECT_THAT(OnlyViolation(Validate(request), "ResourceConfig.InstanceType"),
                HasSubstr("ml.<family>.<size>"))
        << bad;
  }
  resources->set_instance_type("ml.m5.large");
  resources->set_instance_count(-1);
  OnlyViolation(Validate(request), "ResourceConfig.InstanceCount");
}

TEST_F(ValidationTest, OptionalSectionsNeedTheirPathsWhenPresent) {
  auto request = Valid();
  request.mutable_tensor_board_output_config();
  request.mutable_checkpoint_config();
  EXPECT_THAT(Fields(Validate(request)),
              ElementsAre("CheckpointConfig.S3Uri", "TensorBoardOutputConfig.S3OutputPath"));
  request.mutable_tensor_board_output_config()->set_s3_output_path((root_ / "tb").string());
  request.mutable_checkpoint_config()->set_s3_uri("file://" + (root_ / "ckpt").string());
  EXPECT_TRUE(Validate(request).ok()) << Validate(request);
  request.mutable_checkpoint_config()->set_s3_uri("/tmp/../etc");
  EXPECT_THAT(OnlyViolation(Validate(request), "CheckpointConfig.S3Uri"), HasSubstr("'..'"));
}

TEST_F(ValidationTest, NulBytesInPathsAreRefused) {
  auto request = Valid();
  request.mutable_debug_hook_config()->set_s3_output_path(std::string("s3://b/a\0b", 10));
  request.mutable_debug_hook_config()->set_local_path(std::string("/opt/ml\0x", 9));
  EXPECT_THAT(Fields(Validate(request)),
              ElementsAre("DebugHookConfig.LocalPath", "DebugHookConfig.S3OutputPath"));
}

// A NUL anywhere (a name, a parameter key or value) is refused before any
// other check sees the string, naming where it is.
TEST_F(ValidationTest, NulBytesAnywhereAreRefusedNamingTheField) {
  auto request = Valid();
  request.mutable_debug_rule_configurations(0)->set_rule_configuration_name(
      std::string("Lo\0ss", 5));
  EXPECT_THAT(OnlyViolation(Validate(request), "DebugRuleConfigurations[0].RuleConfigurationName"),
              HasSubstr("NUL"));

  request = Valid();
  (*request.mutable_profiler_rule_configurations(0)
        ->mutable_rule_parameters())["CPUBottleneck_threshold"] = std::string("5\0", 2);
  EXPECT_THAT(Fields(Validate(request)),
              ElementsAre("ProfilerRuleConfigurations[0].RuleParameters.CPUBottleneck_threshold"));

  request = Valid();
  (*request.mutable_hyper_parameters())[std::string("k\0", 2)] = "v";
  EXPECT_THAT(Fields(Validate(request)), ::testing::Contains(HasSubstr("HyperParameters key")));

  // Only the element with the NUL is walked, yet it is named by its index
  // among all (the first one has no zero byte in its wire form).
  request = Valid();
  (*AddDebugRule(request, "Overfit", "Overfit")->mutable_rule_parameters())["threshold"] =
      std::string("0.\0", 3);
  EXPECT_THAT(Fields(Validate(request)),
              ElementsAre("DebugRuleConfigurations[1].RuleParameters.threshold"));

  v1::UpdateTrainingJobRequest update;
  update.set_training_job_name("job-1");
  AddProfilerRule(update, std::string("R\0", 2), "CPUBottleneck");
  EXPECT_THAT(Fields(ValidateUpdate(update)),
              ElementsAre("ProfilerRuleConfigurations[0].RuleConfigurationName"));
}

// SageMaker's LocalPath defaults are absolute (/opt/ml/...); the agent writes
// where they say, so a relative or ".." path would lead its writes anywhere.
TEST_F(ValidationTest, LocalPathsMustBeAbsoluteWithoutDotDot) {
  auto request = Valid();
  request.mutable_debug_hook_config()->set_local_path("/opt/ml/output/tensors");
  request.mutable_checkpoint_config()->set_s3_uri("s3://bucket/ckpt");
  request.mutable_checkpoint_config()->set_local_path("/opt/ml/checkpoints");
  request.mutable_tensor_board_output_config()->set_s3_output_path("s3://bucket/tb");
  request.mutable_tensor_board_output_config()->set_local_path("/opt/ml/output/tensorboard");
  EXPECT_TRUE(Validate(request).ok()) << Validate(request);

  request.mutable_debug_hook_config()->set_local_path("tensors");
  request.mutable_checkpoint_config()->set_local_path("/opt/ml/../../etc");
  request.mutable_tensor_board_output_config()->set_local_path("./tb");
  absl::Status status = Validate(request);
  EXPECT_THAT(Fields(status), ::testing::UnorderedElementsAre("DebugHookConfig.LocalPath",
                                                              "CheckpointConfig.LocalPath",
                                                              "TensorBoardOutputConfig.LocalPath"));
  EXPECT_THAT(DescriptionOf(status, "DebugHookConfig.LocalPath"),
              HasSubstr("not an absolute path"));
  EXPECT_THAT(DescriptionOf(status, "CheckpointConfig.LocalPath"), HasSubstr("'..'"));
}

// other_trials names a job or a trial path; a path is confined to the data
// roots at Create, like every output path (it used to be found out only when
// the rule ran, after reading outside the roots).
TEST_F(ValidationTest, OtherTrialsIsAJobNameOrAConfinedPath) {
  auto request = Valid();
  auto* rule = AddDebugRule(request, "Similar", "SimilarAcrossRuns");
  (*rule->mutable_rule_parameters())["other_trials"] = "baseline-job";
  EXPECT_TRUE(Validate(request).ok()) << Validate(request);
  (*rule->mutable_rule_parameters())["other_trials"] = (root_ / "baseline").string();
  EXPECT_TRUE(Validate(request).ok()) << Validate(request);

  const std::string field = "DebugRuleConfigurations[1].RuleParameters.other_trials";
  (*rule->mutable_rule_parameters())["other_trials"] = (base_ / "outside").string();
  EXPECT_THAT(OnlyViolation(Validate(request), field), HasSubstr(root_.string()));
  (*rule->mutable_rule_parameters())["other_trials"] = "../outside";
  EXPECT_THAT(OnlyViolation(Validate(request), field),
              HasSubstr("neither a training job name nor an absolute trial path"));
}

// --- Debugger configuration -----------------------------------------------------------

TEST_F(ValidationTest, DebugHookConfigLimits) {
  auto request = Valid();
  auto* hook = request.mutable_debug_hook_config();
  for (int i = 0; i < 20; ++i) {
    (*hook->mutable_hook_parameters())[absl::StrCat("param", i)] = Repeat('v', 256);
    auto* collection = hook->add_collection_configurations();
    collection->set_collection_name(absl::StrCat("collection", i));
    for (int j = 0; j < 20; ++j) {
      (*collection->mutable_collection_parameters())[absl::StrCat("k", j)] = "v";
    }
  }
  hook->mutable_collection_configurations(0)->set_collection_name(Repeat('c', 256));
  (*hook->mutable_hook_parameters())[Repeat('k', 256)] = "v";
  hook->mutable_hook_parameters()->erase("param0");
  EXPECT_TRUE(Validate(request).ok()) << Validate(request);

  (*hook->mutable_hook_parameters())["param0"] = "v";
  hook->add_collection_configurations()->set_collection_name("one-more");
  (*hook->mutable_collection_configurations(1)->mutable_collection_parameters())["k20"] = "v";
  (*hook->mutable_collection_configurations(2)->mutable_collection_parameters())["k0"] =
      Repeat('v', 257);
  auto* params3 = hook->mutable_collection_configurations(3)->mutable_collection_parameters();
  params3->erase("k0");
  (*params3)[""] = "v";
  hook->mutable_collection_configurations(4)->set_collection_name(Repeat('c', 257));
  hook->mutable_collection_configurations(5)->clear_collection_name();
  hook->mutable_collection_configurations(6)->set_collection_name("collection7");
  absl::Status status = Validate(request);
  EXPECT_THAT(
      Fields(status),
      ElementsAre("DebugHookConfig.HookParameters", "DebugHookConfig.CollectionConfigurations",
                  "DebugHookConfig.CollectionConfigurations[1].CollectionParameters",
                  "DebugHookConfig.CollectionConfigurations[2].CollectionParameters.k0",
                  "DebugHookConfig.CollectionConfigurations[3].CollectionParameters[\"\"]",
                  "DebugHookConfig.CollectionConfigurations[4].CollectionName",
                  "DebugHookConfig.CollectionConfigurations[5].CollectionName",
                  "DebugHookConfig.CollectionConfigurations[7].CollectionName"));
  EXPECT_THAT(DescriptionOf(status, "DebugHookConfig.CollectionConfigurations[7].CollectionName"),
              HasSubstr("CollectionConfigurations[6]"));
}

TEST_F(ValidationTest, DebugHookConfigNeedsAnOutputPath) {
  auto request = Valid();
  request.mutable_debug_hook_config()->clear_s3_output_path();
  EXPECT_THAT(OnlyViolation(Validate(request), "DebugHookConfig.S3OutputPath"),
              HasSubstr(root_.string()));
}

TEST_F(ValidationTest, TwentyRulesOfEachKindAreAllowedTwentyOneAreNot) {
  v1::CreateTrainingJobRequest request = Valid();
  request.clear_debug_rule_configurations();
  request.clear_profiler_rule_configurations();
  for (int i = 0; i < kMaxRulesPerKind; ++i) {
    AddDebugRule(request, absl::StrCat("debug-", i), "VanishingGradient");
    AddProfilerRule(request, absl::StrCat("profiler-", i), "CPUBottleneck");
  }
  EXPECT_TRUE(Validate(request).ok()) << Validate(request);

  auto debug21 = request;
  AddDebugRule(debug21, "debug-20", "VanishingGradient");
  EXPECT_THAT(OnlyViolation(Validate(debug21), "DebugRuleConfigurations"),
              HasSubstr("21 rule configurations; at most 20"));
  auto profiler21 = request;
  AddProfilerRule(profiler21, "profiler-20", "CPUBottleneck");
  EXPECT_THAT(OnlyViolation(Validate(profiler21), "ProfilerRuleConfigurations"),
              HasSubstr("21 rule configurations; at most 20"));
}

TEST_F(ValidationTest, RuleConfigurationNameLengthAndUniqueness) {
  auto request = Valid();
  request.mutable_debug_rule_configurations(0)->set_rule_configuration_name(Repeat('n', 256));
  EXPECT_TRUE(Validate(request).ok());
  request.mutable_debug_rule_configurations(0)->set_rule_configuration_name(Repeat('n', 257));
  OnlyViolation(Validate(request), "DebugRuleConfigurations[0].RuleConfigurationName");
  request.mutable_debug_rule_configurations(0)->clear_rule_configuration_name();
  EXPECT_THAT(OnlyViolation(Validate(request), "DebugRuleConfigurations[0].RuleConfigurationName"),
              HasSubstr("required"));

  request = Valid();
  AddDebugRule(request, "Loss", "Overfit");               // Same as DebugRuleConfigurations[0].
  AddProfilerRule(request, "Report", "CPUBottleneck");    // Same as ProfilerRuleConfigurations[0].
  AddProfilerRule(request, "Loss", "LowGPUUtilization");  // Same as a debug rule.
  absl::Status status = Validate(request);
  EXPECT_THAT(Fields(status), ElementsAre("DebugRuleConfigurations[1].RuleConfigurationName",
                                          "ProfilerRuleConfigurations[1].RuleConfigurationName",
                                          "ProfilerRuleConfigurations[2].RuleConfigurationName"));
  EXPECT_THAT(DescriptionOf(status, "DebugRuleConfigurations[1].RuleConfigurationName"),
              HasSubstr("already the name of DebugRuleConfigurations[0]"));
  EXPECT_THAT(DescriptionOf(status, "ProfilerRuleConfigurations[2].RuleConfigurationName"),
              AllOf(HasSubstr("DebugRuleConfigurations[0]"),
                    HasSubstr("unique across DebugRuleConfigurations and "
                              "ProfilerRuleConfigurations")));
}

// A line break in a name would forge a header of a rule action's webhook
// request (Idempotency-Key) or email (Subject), or a log line: every name
// refuses control characters and line terminators, naming the field.
TEST_F(ValidationTest, NamesWithControlCharactersOrLineBreaksAreRefused) {
  for (const std::string bad : {"Loss\r\nBcc: x@example.com", "Loss\n", "a\tb", "a\x7f",
                                "a\x1b[31m", "a\u2028b", "a\u0085b"}) {
    auto request = Valid();
    request.mutable_debug_rule_configurations(0)->set_rule_configuration_name(bad);
    EXPECT_THAT(
        OnlyViolation(Validate(request), "DebugRuleConfigurations[0].RuleConfigurationName"),
        HasSubstr("control character"))
        << bad;
    request = Valid();
    request.mutable_profiler_rule_configurations(0)->set_rule_configuration_name(bad);
    OnlyViolation(Validate(request), "ProfilerRuleConfigurations[0].RuleConfigurationName");
    request = Valid();
    request.mutable_debug_hook_config()->add_collection_configurations()->set_collection_name(bad);
    OnlyViolation(Validate(request), "DebugHookConfig.CollectionConfigurations[0].CollectionName");
    request = Valid();
    auto* metric = request.mutable_algorithm_specification()->add_metric_definitions();
    metric->set_name(bad);
    metric->set_regex("loss=(.*)");
    OnlyViolation(Validate(request), "AlgorithmSpecification.MetricDefinitions[0].Name");

    v1::UpdateTrainingJobRequest update;
    update.set_training_job_name("job");
    AddProfilerRule(update, bad, "CPUBottleneck");
    OnlyViolation(ValidateUpdate(update), "ProfilerRuleConfigurations[0].RuleConfigurationName");
  }
  // Other Unicode is fine, as SageMaker's `.*` allows it.
  auto request = Valid();
  request.mutable_debug_rule_configurations(0)->set_rule_configuration_name(
      "Verlust \u00fcber Zeit");
  EXPECT_TRUE(Validate(request).ok()) << Validate(request);
}

TEST_F(ValidationTest, RuleToInvokeIsRequiredWithABuiltinImage) {
  auto request = Valid();
  request.mutable_debug_rule_configurations(0)->mutable_rule_parameters()->clear();
  EXPECT_THAT(
      OnlyViolation(Validate(request), "DebugRuleConfigurations[0].RuleParameters.rule_to_invoke"),
      HasSubstr("required"));
}

TEST_F(ValidationTest, ActionJsonIsCheckedNamingTheProblem) {
  auto request = Valid();
  auto& parameters = *request.mutable_debug_rule_configurations(0)->mutable_rule_parameters();
  parameters["action_json"] =
      R"([{"name": "stoptraining", "training_job_prefix": "job"},
          {"name": "email", "endpoint": "ml@example.com"}, {"name": "sms", "endpoint": "+12223334444"}])";
  EXPECT_TRUE(Validate(request).ok());
  parameters["action_json"] = R"({"name": "email", "endpoint": "not an address"})";
  EXPECT_THAT(
      OnlyViolation(Validate(request), "DebugRuleConfigurations[0].RuleParameters.action_json"),
      HasSubstr("an email address like"));
  parameters["action_json"] = R"([{"name": "stoptraining"}, {"name": "page"}])";
  EXPECT_THAT(
      OnlyViolation(Validate(request), "DebugRuleConfigurations[0].RuleParameters.action_json"),
      HasSubstr("action 1: unknown action \"page\""));
}

TEST_F(ValidationTest, UnknownRuleToInvokeSuggestsCloseNames) {
  auto request = Valid();
  (*request.mutable_debug_rule_configurations(0)->mutable_rule_parameters())["rule_to_invoke"] =
      "lossnotdecreasing";
  EXPECT_THAT(
      OnlyViolation(Validate(request), "DebugRuleConfigurations[0].RuleParameters.rule_to_invoke"),
      AllOf(HasSubstr("'lossnotdecreasing' is not a built-in debugging rule"),
            HasSubstr("did you mean 'LossNotDecreasing'")));

  (*request.mutable_debug_rule_configurations(0)->mutable_rule_parameters())["rule_to_invoke"] =
      "VanishingGradients";
  EXPECT_THAT(
      OnlyViolation(Validate(request), "DebugRuleConfigurations[0].RuleParameters.rule_to_invoke"),
      HasSubstr("did you mean 'VanishingGradient'"));

  // Nothing close: every built-in rule of the kind is listed.
  (*request.mutable_debug_rule_configurations(0)->mutable_rule_parameters())["rule_to_invoke"] =
      "Zzzzzzzzzz";
  const std::string description =
      OnlyViolation(Validate(request), "DebugRuleConfigurations[0].RuleParameters.rule_to_invoke");
  for (const BuiltinRuleInfo& rule : BuiltinRules()) {
    if (rule.kind == RuleKind::kDebug) {
      EXPECT_THAT(description, HasSubstr(rule.name));
    } else {
      EXPECT_THAT(description, Not(HasSubstr(rule.name)));
    }
  }
}

TEST_F(ValidationTest, RuleInTheWrongListSaysWhereItBelongs) {
  auto request = Valid();
  AddProfilerRule(request, "Loss2", "LossNotDecreasing");
  AddDebugRule(request, "Cpu", "CPUBottleneck");
  absl::Status status = Validate(request);
  EXPECT_THAT(Fields(status),
              ElementsAre("DebugRuleConfigurations[1].RuleParameters.rule_to_invoke",
                          "ProfilerRuleConfigurations[1].RuleParameters.rule_to_invoke"));
  EXPECT_THAT(DescriptionOf(status, "ProfilerRuleConfigurations[1].RuleParameters.rule_to_invoke"),
              HasSubstr("'LossNotDecreasing' is a built-in debugging rule; configure it in "
                        "DebugRuleConfigurations, not in ProfilerRuleConfigurations"));
  EXPECT_THAT(DescriptionOf(status, "DebugRuleConfigurations[1].RuleParameters.rule_to_invoke"),
              HasSubstr("configure it in ProfilerRuleConfigurations"));
}

TEST_F(ValidationTest, EveryBuiltinRuleIsAcceptedInItsList) {
  auto request = Valid();
  request.clear_debug_rule_configurations();
  request.clear_profiler_rule_configurations();
  for (const BuiltinRuleInfo& rule : BuiltinRules()) {
    if (rule.kind == RuleKind::kDebug) {
      AddDebugRule(request, std::string(rule.name), std::string(rule.name));
    } else {
      AddProfilerRule(request, std::string(rule.name), std::string(rule.name));
    }
  }
  // 21 debugging rules would be too many for one job; drop one.
  while (request.debug_rule_configurations_size() > kMaxRulesPerKind) {
    request.mutable_debug_rule_configurations()->RemoveLast();
  }
  EXPECT_TRUE(Validate(request).ok()) << Validate(request);
}

TEST_F(ValidationTest, CustomEvaluatorMustBeAllowedByTheServer) {
  auto request = Valid();
  auto* custom = request.add_debug_rule_configurations();
  custom->set_rule_configuration_name("mine");
  custom->set_rule_evaluator_image("registry.example.com/my-rule:1.0");
  (*custom->mutable_rule_parameters())["threshold"] = "0.5";
  const std::string description =
      OnlyViolation(Validate(request), "DebugRuleConfigurations[1].RuleEvaluatorImage");
  EXPECT_THAT(description,
              AllOf(HasSubstr("not a built-in rules image"), HasSubstr("--allow-evaluator"),
                    HasSubstr("registry.example.com/my-rule:1.0")));
  options_.allowed_custom_evaluators = {"registry.example.com/my-rule:1.0"};
  EXPECT_TRUE(Validate(request).ok()) << Validate(request);
  // No rule_to_invoke is needed for a custom evaluator; nor is the list shared
  // with other tags of the image.
  custom->set_rule_evaluator_image("registry.example.com/my-rule:2.0");
  OnlyViolation(Validate(request), "DebugRuleConfigurations[1].RuleEvaluatorImage");
}

TEST_F(ValidationTest, RuleEvaluatorImageRequiredAndLimited) {
  auto request = Valid();
  request.mutable_profiler_rule_configurations(0)->clear_rule_evaluator_image();
  EXPECT_THAT(OnlyViolation(Validate(request), "ProfilerRuleConfigurations[0].RuleEvaluatorImage"),
              HasSubstr("required"));
  const std::string long_image = Repeat('i', 256);
  options_.allowed_custom_evaluators = {long_image};
  request.mutable_profiler_rule_configurations(0)->set_rule_evaluator_image(long_image);
  EXPECT_THAT(OnlyViolation(Validate(request), "ProfilerRuleConfigurations[0].RuleEvaluatorImage"),
              HasSubstr("at most 255"));
}

TEST_F(ValidationTest, RuleParametersAndOtherRuleMembers) {
  auto request = Valid();
  auto* rule = request.mutable_debug_rule_configurations(0);
  for (int i = 0; i < 99; ++i) (*rule->mutable_rule_parameters())[absl::StrCat("p", i)] = "v";
  rule->set_instance_type("ml.m5.xlarge");
  rule->set_volume_size_in_gb(30);
  rule->set_s3_output_path((root_ / "rules").string());
  EXPECT_TRUE(Validate(request).ok()) << Validate(request);
  (*rule->mutable_rule_parameters())["p99"] = "v";
  EXPECT_THAT(OnlyViolation(Validate(request), "DebugRuleConfigurations[0].RuleParameters"),
              HasSubstr("101 entries; at most 100"));
  rule->mutable_rule_parameters()->erase("p99");
  rule->set_instance_type("m5.xlarge");
  rule->set_volume_size_in_gb(-1);
  rule->set_s3_output_path("/elsewhere");
  EXPECT_THAT(Fields(Validate(request)), ElementsAre("DebugRuleConfigurations[0].S3OutputPath",
                                                     "DebugRuleConfigurations[0].InstanceType",
                                                     "DebugRuleConfigurations[0].VolumeSizeInGB"));
}

// --- ProfilerConfig ---------------------------------------------------------------------

TEST_F(ValidationTest, EveryProfilingIntervalIsAcceptedOthersAreNot) {
  auto request = Valid();
  for (int64_t interval : kProfilingIntervalsMs) {
    request.mutable_profiler_config()->set_profiling_interval_in_milliseconds(interval);
    EXPECT_TRUE(Validate(request).ok()) << interval;
  }
  for (int64_t interval :
       {int64_t{0}, int64_t{-500}, int64_t{99}, int64_t{750}, int64_t{60001}, int64_t{1} << 40}) {
    request.mutable_profiler_config()->set_profiling_interval_in_milliseconds(interval);
    EXPECT_EQ(
        OnlyViolation(Validate(request), "ProfilerConfig.ProfilingIntervalInMilliseconds"),
        absl::StrCat(interval, " is not allowed; use one of 100, 200, 500, 1000, 5000, 60000"));
  }
  request.mutable_profiler_config()->clear_profiling_interval_in_milliseconds();
  EXPECT_TRUE(Validate(request).ok());
}

TEST_F(ValidationTest, FrameworkProfilingConfigsAreChecked) {
  auto request = Valid();
  auto& parameters = *request.mutable_profiler_config()->mutable_profiling_parameters();
  // The Debugger guide's template, trailing comma included.
  parameters["DataloaderProfilingConfig"] =
      "{\"StartStep\": 5, \"NumSteps\": 3, \"MetricsRegex\": \".*\", }";
  parameters["DetailedProfilingConfig"] =
      "{ \"StartTimeInSecSinceEpoch\": 12345567789, \"DurationInSeconds\": 10 }";
  parameters["PythonProfilingConfig"] =
      "{\"StartStep\": 5, \"NumSteps\": 3, \"ProfilerName\": \"cProfile\", "
      "\"cProfileTimer\": \"total_time\"}";
  parameters["RotateMaxFileSizeInBytes"] = "1048576";
  EXPECT_TRUE(Validate(request).ok()) << Validate(request);

  const std::string field = "ProfilerConfig.ProfilingParameters.DetailedProfilingConfig";
  parameters["DetailedProfilingConfig"] = "StartStep=5";
  EXPECT_THAT(OnlyViolation(Validate(request), field), HasSubstr("JSON object"));
  parameters["DetailedProfilingConfig"] = "{\"StartStep\": -1}";
  EXPECT_THAT(OnlyViolation(Validate(request), field), HasSubstr("StartStep must be an integer"));
  parameters["DetailedProfilingConfig"] = "{\"StartStep\": 5, \"DurationInSeconds\": 10}";
  EXPECT_THAT(OnlyViolation(Validate(request), field), HasSubstr("use one"));
  parameters["DetailedProfilingConfig"] = "{\"NumSteps\": 3}";
  EXPECT_THAT(OnlyViolation(Validate(request), field), HasSubstr("NumSteps needs StartStep"));
  parameters["DetailedProfilingConfig"] = "{\"StartStep\": 5, \"Steps\": 3}";
  EXPECT_THAT(OnlyViolation(Validate(request), field), HasSubstr("unknown member \"Steps\""));
  parameters.erase("DetailedProfilingConfig");
  parameters["PythonProfilingConfig"] = "{\"StartStep\": 1, \"ProfilerName\": \"perf\"}";
  EXPECT_THAT(
      OnlyViolation(Validate(request), "ProfilerConfig.ProfilingParameters.PythonProfilingConfig"),
      HasSubstr("cProfile or Pyinstrument"));
  parameters.erase("PythonProfilingConfig");
  parameters["RotateMaxFileSizeInBytes"] = "big";
  EXPECT_THAT(OnlyViolation(Validate(request),
                            "ProfilerConfig.ProfilingParameters.RotateMaxFileSizeInBytes"),
              HasSubstr("positive integer"));
}

TEST_F(ValidationTest, ProfilingParametersAndPath) {
  auto request = Valid();
  auto* profiler = request.mutable_profiler_config();
  for (int i = 0; i < 20; ++i)
    (*profiler->mutable_profiling_parameters())[absl::StrCat("P", i)] = "v";
  profiler->set_s3_output_path("file://" + (root_ / "profiler").string());
  EXPECT_TRUE(Validate(request).ok()) << Validate(request);
  (*profiler->mutable_profiling_parameters())["P20"] = "v";
  OnlyViolation(Validate(request), "ProfilerConfig.ProfilingParameters");
  profiler->mutable_profiling_parameters()->erase("P20");
  profiler->set_s3_output_path("profiler-output");
  OnlyViolation(Validate(request), "ProfilerConfig.S3OutputPath");
}

// --- All violations together, robustness -----------------------------------------------

TEST_F(ValidationTest, AllViolationsAreReportedTogetherWithTheirFieldPaths) {
  auto request = Valid();
  request.set_training_job_name("bad_name!");
  (*request.mutable_hyper_parameters())["epochs"] = Repeat('9', 2501);
  (*request.mutable_hyper_parameters())["train.lr"] = Repeat('1', 2501);
  AddDebugRule(request, "Second", "NoSuchRule");
  request.mutable_profiler_config()->set_profiling_interval_in_milliseconds(750);
  request.mutable_output_data_config()->set_s3_output_path((base_ / "outside").string());
  absl::Status status = Validate(request);
  ASSERT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Fields(status),
              ElementsAre("TrainingJobName", "HyperParameters.epochs",
                          "HyperParameters[\"train.lr\"]", "OutputDataConfig.S3OutputPath",
                          "DebugRuleConfigurations[1].RuleParameters.rule_to_invoke",
                          "ProfilerConfig.ProfilingIntervalInMilliseconds"));
  // The message lists them all too, for clients that ignore the details.
  for (const std::string& field : Fields(status)) {
    EXPECT_THAT(status.message(), HasSubstr(field + ": "));
  }
  EXPECT_THAT(status.message(), HasSubstr("750 is not allowed"));
}

TEST_F(ValidationTest, HugeRequestsAreRefusedWithABoundedReport) {
  auto request = Valid();
  for (int i = 0; i < 5000; ++i) {
    AddDebugRule(request, "same", absl::StrCat("junk\xff\x01", i));
  }
  (*request.mutable_hyper_parameters())[Repeat('\x01', 1 << 20)] = Repeat('\xfe', 1 << 20);
  request.set_training_job_name(Repeat('n', 1 << 20));
  absl::Status status = Validate(request);
  ASSERT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  std::vector<FieldViolation> violations = FieldViolationsOf(status);
  ASSERT_GE(violations.size(), 3u);
  EXPECT_EQ(violations[0].field, "TrainingJobName");
  EXPECT_THAT(violations.back().description, HasSubstr("more problems"));
  // Small enough for gRPC's default 8 KiB of trailers, which carry the message
  // and, base64 encoded, a google.rpc.Status with the message and the details.
  const size_t message = status.message().size();
  const size_t details = status.GetPayload(kBadRequestTypeUrl)->size();
  EXPECT_LT(message + (message + details) * 4 / 3, 7000u);
}

TEST_F(ValidationTest, ManySmallViolationsAreListedUpToTwenty) {
  auto request = Valid();
  for (int i = 0; i < 30; ++i) request.add_tags()->set_key("");  // Short violations.
  absl::Status status = Validate(request);
  std::vector<FieldViolation> violations = FieldViolationsOf(status);
  ASSERT_THAT(violations, SizeIs(21));
  EXPECT_EQ(violations[0].field, "Tags[0].Key");
  EXPECT_EQ(violations[19].field, "Tags[19].Key");
  EXPECT_EQ(violations[20].field, "Tags[20].Key");
  EXPECT_THAT(violations[20].description, HasSubstr("and 10 more problems"));
}

TEST_F(ValidationTest, ValuesInMessagesAreEscapedAndShortened) {
  auto request = Valid();
  (*request.mutable_debug_rule_configurations(0)->mutable_rule_parameters())["rule_to_invoke"] =
      std::string("\x01\n\"", 3) + Repeat('z', 200);
  const std::string description =
      OnlyViolation(Validate(request), "DebugRuleConfigurations[0].RuleParameters.rule_to_invoke");
  EXPECT_THAT(description, HasSubstr("'\\x01\\n\\\"zzz"));
  EXPECT_THAT(description, HasSubstr("...'"));
  EXPECT_LT(description.size(), 600u);
}

TEST_F(ValidationTest, RandomBytesNeverCrashTheValidators) {
  google::protobuf::LogSilencer quiet;  // Invalid UTF-8 in strings is logged by the parser.
  std::mt19937 random(20240611);
  const std::string valid = CliTemplateRequest().SerializeAsString();
  std::uniform_int_distribution<int> byte(0, 255);
  int parsed = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string bytes;
    if (i % 2 == 0) {
      bytes.resize(random() % 512);
      for (char& c : bytes) c = static_cast<char>(byte(random));
    } else {
      // Mutations of a valid request reach deeper into the message.
      bytes = valid;
      const int flips = 1 + random() % 8;
      for (int f = 0; f < flips; ++f)
        bytes[random() % bytes.size()] = static_cast<char>(byte(random));
    }
    v1::CreateTrainingJobRequest create;
    parsed += create.ParseFromString(bytes);
    // Partially parsed messages are validated too: anything must be refused cleanly.
    absl::Status status = Validate(create);
    if (!status.ok()) {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(FieldViolationsOf(status), Not(IsEmpty()));
    }
    v1::UpdateTrainingJobRequest update;
    (void)update.ParseFromString(bytes);
    absl::Status update_status = ValidateUpdate(update);
    EXPECT_TRUE(update_status.ok() || update_status.code() == absl::StatusCode::kInvalidArgument);
    v1::ListTrainingJobsRequest list;
    (void)list.ParseFromString(bytes);
    absl::Status list_status = ValidateListTrainingJobsRequest(list);
    EXPECT_TRUE(list_status.ok() || list_status.code() == absl::StatusCode::kInvalidArgument);
  }
  EXPECT_GT(parsed, 0);  // The mutations did exercise parsed messages.
}

// --- UpdateTrainingJob ------------------------------------------------------------------

TEST_F(ValidationTest, UpdateDisableProfilerMustComeAlone) {
  v1::UpdateTrainingJobRequest update;
  update.set_training_job_name("job-1");
  update.mutable_profiler_config()->set_disable_profiler(true);
  EXPECT_TRUE(ValidateUpdate(update).ok());

  update.mutable_profiler_config()->set_profiling_interval_in_milliseconds(1000);
  EXPECT_THAT(OnlyViolation(ValidateUpdate(update), "ProfilerConfig.DisableProfiler"),
              HasSubstr("ProfilingIntervalInMilliseconds"));
  update.mutable_profiler_config()->clear_profiling_interval_in_milliseconds();
  (*update.mutable_profiler_config()->mutable_profiling_parameters())["DetailedProfilingConfig"] =
      "{}";
  update.mutable_profiler_config()->set_s3_output_path("s3://b/p");
  EXPECT_THAT(OnlyViolation(ValidateUpdate(update), "ProfilerConfig.DisableProfiler"),
              AllOf(HasSubstr("S3OutputPath"), HasSubstr("ProfilingParameters")));
  update.mutable_profiler_config()->clear_profiling_parameters();
  update.mutable_profiler_config()->clear_s3_output_path();
  AddProfilerRule(update, "Cpu", "CPUBottleneck");
  EXPECT_THAT(OnlyViolation(ValidateUpdate(update), "ProfilerConfig.DisableProfiler"),
              HasSubstr("ProfilerRuleConfigurations"));

  // DisableProfiler false is not a change that conflicts.
  update.mutable_profiler_config()->set_disable_profiler(false);
  update.mutable_profiler_config()->set_profiling_interval_in_milliseconds(200);
  EXPECT_TRUE(ValidateUpdate(update).ok()) << ValidateUpdate(update);
}

TEST_F(ValidationTest, UpdateChecksTheProfilerConfigAndNewRules) {
  v1::UpdateTrainingJobRequest update;
  update.set_training_job_name("job_1");
  update.mutable_profiler_config()->set_profiling_interval_in_milliseconds(300);
  update.mutable_profiler_config()->set_s3_output_path("/outside/x");
  AddProfilerRule(update, "A", "CPUBottleneck");
  AddProfilerRule(update, "A", "StepOutlier");
  AddProfilerRule(update, "B", "DeadRelu");
  absl::Status status = ValidateUpdate(update);
  EXPECT_THAT(Fields(status),
              ElementsAre("TrainingJobName", "ProfilerConfig.S3OutputPath",
                          "ProfilerConfig.ProfilingIntervalInMilliseconds",
                          "ProfilerRuleConfigurations[1].RuleConfigurationName",
                          "ProfilerRuleConfigurations[2].RuleParameters.rule_to_invoke"));
  EXPECT_THAT(DescriptionOf(status, "ProfilerRuleConfigurations[2].RuleParameters.rule_to_invoke"),
              HasSubstr("configure it in DebugRuleConfigurations"));

  v1::UpdateTrainingJobRequest many;
  many.set_training_job_name("job-1");
  for (int i = 0; i < kMaxRulesPerKind; ++i)
    AddProfilerRule(many, absl::StrCat("r", i), "BatchSize");
  EXPECT_TRUE(ValidateUpdate(many).ok());
  AddProfilerRule(many, "r20", "BatchSize");
  OnlyViolation(ValidateUpdate(many), "ProfilerRuleConfigurations");
}

// --- ListTrainingJobs ------------------------------------------------------------------

google::protobuf::Timestamp At(int64_t seconds, int32_t nanos = 0) {
  google::protobuf::Timestamp t;
  t.set_seconds(seconds);
  t.set_nanos(nanos);
  return t;
}

TEST_F(ValidationTest, ListMaxResultsAndNameContains) {
  v1::ListTrainingJobsRequest list;
  EXPECT_TRUE(ValidateListTrainingJobsRequest(list).ok());
  for (int ok : {1, 10, 100}) {
    list.set_max_results(ok);
    EXPECT_TRUE(ValidateListTrainingJobsRequest(list).ok()) << ok;
  }
  for (int bad : {0, -1, 101}) {
    list.set_max_results(bad);
    EXPECT_THAT(OnlyViolation(ValidateListTrainingJobsRequest(list), "MaxResults"),
                HasSubstr("use 1-100"));
  }
  list.clear_max_results();
  list.set_name_contains(Repeat('a', 63));
  EXPECT_TRUE(ValidateListTrainingJobsRequest(list).ok());
  list.set_name_contains("job-A-1");
  EXPECT_TRUE(ValidateListTrainingJobsRequest(list).ok());
  list.set_name_contains(Repeat('a', 64));
  OnlyViolation(ValidateListTrainingJobsRequest(list), "NameContains");
  list.set_name_contains("a_b");
  OnlyViolation(ValidateListTrainingJobsRequest(list), "NameContains");
  list.clear_name_contains();
  list.set_next_token(Repeat('t', 8192));
  EXPECT_TRUE(ValidateListTrainingJobsRequest(list).ok());
  list.set_next_token(Repeat('t', 8193));
  OnlyViolation(ValidateListTrainingJobsRequest(list), "NextToken");
  list.clear_next_token();
  list.set_sort_by("Name");
  list.set_sort_order("Ascending");
  EXPECT_TRUE(ValidateListTrainingJobsRequest(list).ok());
  list.set_sort_by("name");
  OnlyViolation(ValidateListTrainingJobsRequest(list), "SortBy");
}

TEST_F(ValidationTest, ListTimeRanges) {
  v1::ListTrainingJobsRequest list;
  *list.mutable_creation_time_after() = At(1000);
  *list.mutable_creation_time_before() = At(1000, 1);
  *list.mutable_last_modified_time_after() = At(5);
  EXPECT_TRUE(ValidateListTrainingJobsRequest(list).ok());
  *list.mutable_creation_time_before() = At(1000);
  EXPECT_THAT(OnlyViolation(ValidateListTrainingJobsRequest(list), "CreationTimeAfter"),
              HasSubstr("is not before CreationTimeBefore"));
  *list.mutable_creation_time_before() = At(2000);
  *list.mutable_last_modified_time_before() = At(4);
  OnlyViolation(ValidateListTrainingJobsRequest(list), "LastModifiedTimeAfter");
  *list.mutable_last_modified_time_before() = At(6, 1000000000);
  OnlyViolation(ValidateListTrainingJobsRequest(list), "LastModifiedTimeBefore");
}

// --- UpdateTrainingJobWarnings ---------------------------------------------

v1::UpdateTrainingJobRequest ProfilingUpdate(
    const std::vector<std::pair<std::string, std::string>>& parameters) {
  v1::UpdateTrainingJobRequest request;
  request.set_training_job_name("MLP-Upper");
  auto* config = request.mutable_profiler_config();
  for (const auto& [key, value] : parameters)
    (*config->mutable_profiling_parameters())[key] = value;
  return request;
}

constexpr char kSteps[] = R"({"StartStep": 5, "NumSteps": 2})";

TEST(UpdateTrainingJobWarningsTest, PythonProfilingMidRunNamesTheCrashAndTheRemedy) {
  const std::vector<std::string> warnings = UpdateTrainingJobWarnings(
      ProfilingUpdate({{"PythonProfilingConfig", kSteps}}), v1::ProfilerConfig());
  ASSERT_THAT(warnings, SizeIs(1));
  EXPECT_THAT(warnings[0],
              AllOf(HasSubstr("ProfilerConfig.ProfilingParameters.PythonProfilingConfig: "),
                    HasSubstr("smdebug 0.x-1.0 with PyTorch 1.9 or later crashes the training"),
                    HasSubstr("set PythonProfilingConfig in the ProfilerConfig of "
                              "CreateTrainingJob instead"),
                    HasSubstr("PyTorch 2 jobs that profile with debugplane_profiler"),
                    HasSubstr("with Python stacks (with_stack); no cProfile")));
}

TEST(UpdateTrainingJobWarningsTest, EachFrameworkProfilingConfigSaysWhatHappens) {
  const std::vector<std::string> warnings =
      UpdateTrainingJobWarnings(ProfilingUpdate({{"PythonProfilingConfig", kSteps},
                                                 {"DetailedProfilingConfig", kSteps},
                                                 {"DataloaderProfilingConfig", kSteps},
                                                 {"RotateMaxFileSizeInBytes", "1048576"}}),
                                v1::ProfilerConfig());
  // Sorted by key, one per framework-profiling entry, none for the rest.
  ASSERT_THAT(warnings, SizeIs(3));
  EXPECT_THAT(warnings[0], AllOf(HasSubstr(".DataloaderProfilingConfig: "),
                                 HasSubstr("crashes the training process"),
                                 HasSubstr("AWS TensorFlow cannot change data loader profiling")));
  EXPECT_THAT(warnings[1], AllOf(HasSubstr(".DetailedProfilingConfig: "),
                                 HasSubstr("ignores detailed profiling"),
                                 HasSubstr("TensorFlow 2.11 and later has no detailed profiling")));
  EXPECT_THAT(warnings[2], HasSubstr(".PythonProfilingConfig: "));
}

TEST(UpdateTrainingJobWarningsTest, ChangesTheFrameworksApplyAtRunTimeGetNone) {
  v1::UpdateTrainingJobRequest interval = ProfilingUpdate({{"LocalPath", "/data/p"}});
  interval.mutable_profiler_config()->set_profiling_interval_in_milliseconds(100);
  EXPECT_THAT(UpdateTrainingJobWarnings(interval, v1::ProfilerConfig()), IsEmpty());

  v1::UpdateTrainingJobRequest rules_only;
  rules_only.set_training_job_name("MLP-Upper");
  rules_only.add_profiler_rule_configurations()->set_rule_configuration_name("CPUBottleneck");
  EXPECT_THAT(UpdateTrainingJobWarnings(rules_only, v1::ProfilerConfig()), IsEmpty());

  v1::UpdateTrainingJobRequest disable;
  disable.mutable_profiler_config()->set_disable_profiler(true);
  EXPECT_THAT(UpdateTrainingJobWarnings(disable, v1::ProfilerConfig()), IsEmpty());
}

TEST(UpdateTrainingJobWarningsTest, OnlyAChangedValueIsAChange) {
  v1::ProfilerConfig current;
  (*current.mutable_profiling_parameters())["DetailedProfilingConfig"] = kSteps;
  EXPECT_THAT(
      UpdateTrainingJobWarnings(ProfilingUpdate({{"DetailedProfilingConfig", kSteps}}), current),
      IsEmpty());
  EXPECT_THAT(UpdateTrainingJobWarnings(
                  ProfilingUpdate({{"DetailedProfilingConfig", R"({"StartStep": 50})"}}), current),
              SizeIs(1));
}

TEST(UpdateTrainingJobWarningsTest, KeysMatchInAnyCaseAsSmdebugLowerCasesThem) {
  const std::vector<std::string> warnings = UpdateTrainingJobWarnings(
      ProfilingUpdate({{"pythonprofilingconfig", kSteps}}), v1::ProfilerConfig());
  ASSERT_THAT(warnings, SizeIs(1));
  EXPECT_THAT(warnings[0],
              AllOf(HasSubstr("ProfilerConfig.ProfilingParameters.pythonprofilingconfig: "),
                    HasSubstr("set PythonProfilingConfig in")));
}

}  // namespace
}  // namespace debugplane::core
