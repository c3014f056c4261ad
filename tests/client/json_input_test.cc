#include "client/cli/json_input.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "debugplane/v1/training_job.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/cli_test_util.h"

namespace debugplane::client {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(StripJsonCommentsTest, DropsLineAndBlockComments) {
  absl::StatusOr<std::string> plain = StripJsonComments(
      "{\n  // a comment\n  \"a\": 1, /* another */ \"b\": [true]\n}\n", "in.json");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(*plain, R"({"a":1,"b":[true]})");
}

TEST(StripJsonCommentsTest, KeepsSlashesInsideStrings) {
  absl::StatusOr<std::string> plain =
      StripJsonComments(R"({"path": "s3://bucket//key", "c": "/* not a comment */"})", "in.json");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(*plain, R"({"c":"/* not a comment */","path":"s3://bucket//key"})");
}

TEST(StripJsonCommentsTest, SyntaxErrorHasLineAndColumn) {
  absl::StatusOr<std::string> plain =
      StripJsonComments("{\n  \"a\": 1,\n  \"b\" 2\n}\n", "job.json");
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plain.status().message(), AllOf(HasSubstr("job.json"), HasSubstr("line 3, column"),
                                              Not(HasSubstr("[json.exception"))));
}

TEST(ParseJsonMessageTest, SageMakerDocTemplateWithCommentsParses) {
  const std::string text = testing::SageMakerCliTemplate();
  // The point of the test: the template as published, with its // lines.
  ASSERT_THAT(text, HasSubstr("// Specify a training Docker container image URI"));

  v1::CreateTrainingJobRequest request;
  absl::Status status = ParseJsonMessage(text, "debugger-training-job-cli.json", &request);
  ASSERT_TRUE(status.ok()) << status;

  EXPECT_EQ(request.training_job_name(), "debugger-aws-cli-test");
  EXPECT_EQ(request.role_arn(),
            "arn:aws:iam::111122223333:role/service-role/"
            "AmazonSageMaker-ExecutionRole-YYYYMMDDT123456");
  EXPECT_EQ(request.algorithm_specification().training_image(),
            "763104351884.dkr.ecr.us-west-2.amazonaws.com/"
            "tensorflow-training:2.4.1-gpu-py37-cu110-ubuntu18.04");
  EXPECT_EQ(request.algorithm_specification().training_input_mode(), "File");
  EXPECT_FALSE(request.algorithm_specification().enable_sage_maker_metrics_time_series());
  EXPECT_EQ(request.hyper_parameters().size(), 2);
  EXPECT_EQ(request.hyper_parameters().at("sagemaker_program"), "entry_point/tf-hvd-train.py");
  EXPECT_EQ(request.output_data_config().s3_output_path(),
            "s3://sagemaker-us-west-2-111122223333/debugger-aws-cli-test/output");

  const v1::DebugHookConfig& hook = request.debug_hook_config();
  EXPECT_EQ(hook.s3_output_path(),
            "s3://sagemaker-us-west-2-111122223333/debugger-aws-cli-test/debug-output");
  ASSERT_EQ(hook.collection_configurations_size(), 1);
  EXPECT_EQ(hook.collection_configurations(0).collection_name(), "losses");
  EXPECT_EQ(hook.collection_configurations(0).collection_parameters().at("train.save_interval"),
            "50");

  ASSERT_EQ(request.debug_rule_configurations_size(), 1);
  const v1::DebugRuleConfiguration& rule = request.debug_rule_configurations(0);
  EXPECT_EQ(rule.rule_configuration_name(), "LossNotDecreasing");
  EXPECT_EQ(rule.rule_evaluator_image(),
            "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest");
  EXPECT_EQ(rule.rule_parameters().at("rule_to_invoke"), "LossNotDecreasing");

  const v1::ProfilerConfig& profiler = request.profiler_config();
  EXPECT_EQ(profiler.s3_output_path(),
            "s3://sagemaker-us-west-2-111122223333/debugger-aws-cli-test/profiler-output");
  ASSERT_TRUE(profiler.has_profiling_interval_in_milliseconds());
  EXPECT_EQ(profiler.profiling_interval_in_milliseconds(), 500);
  EXPECT_EQ(profiler.profiling_parameters().size(), 4);
  // Values are JSON-in-a-string (with SageMaker's trailing commas); they
  // must come through verbatim.
  EXPECT_EQ(profiler.profiling_parameters().at("DetailedProfilingConfig"),
            R"({"StartStep": 5, "NumSteps": 3, })");
  EXPECT_EQ(profiler.profiling_parameters().at("LocalPath"), "/opt/ml/output/profiler/");

  ASSERT_EQ(request.profiler_rule_configurations_size(), 1);
  EXPECT_EQ(request.profiler_rule_configurations(0).rule_configuration_name(), "ProfilerReport");
  EXPECT_EQ(request.profiler_rule_configurations(0).rule_parameters().at("rule_to_invoke"),
            "ProfilerReport");

  EXPECT_EQ(request.resource_config().instance_type(), "ml.p3.8xlarge");
  EXPECT_EQ(request.resource_config().instance_count(), 1);
  EXPECT_EQ(request.resource_config().volume_size_in_gb(), 30);
  ASSERT_TRUE(request.stopping_condition().has_max_runtime_in_seconds());
  EXPECT_EQ(request.stopping_condition().max_runtime_in_seconds(), 86400);
}

TEST(ParseJsonMessageTest, UnknownTopLevelFieldIsNamed) {
  v1::CreateTrainingJobRequest request;
  absl::Status status = ParseJsonMessage(R"({"TrainingJobName": "a", "RemoteDebugConfig": {}})",
                                         "job.json", &request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("job.json"), HasSubstr("\"RemoteDebugConfig\""),
                                      HasSubstr("CreateTrainingJobRequest")));
}

TEST(ParseJsonMessageTest, UnknownNestedFieldIsNamedByPathWithSuggestion) {
  v1::CreateTrainingJobRequest request;
  absl::Status status = ParseJsonMessage(R"({
    "DebugRuleConfigurations": [
      {"RuleConfigurationName": "a"},
      {"RuleConfigurationName": "b", "Ruleparameters": {"x": "1"}}
    ]
  })",
                                         "job.json", &request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("\"DebugRuleConfigurations[1].Ruleparameters\""),
                                      HasSubstr("DebugRuleConfiguration"),
                                      HasSubstr("did you mean \"RuleParameters\"")));
}

TEST(ParseJsonMessageTest, ListsEveryUnknownField) {
  v1::CreateTrainingJobRequest request;
  absl::Status status = ParseJsonMessage(R"({"Foo": 1, "ResourceConfig": {"InstanceGroups": []}})",
                                         "job.json", &request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("2 unknown fields"), HasSubstr("  - Foo: "),
                                      HasSubstr("  - ResourceConfig.InstanceGroups: ")));
}

TEST(ParseJsonMessageTest, MapKeysAreNotFieldNames) {
  v1::CreateTrainingJobRequest request;
  absl::Status status = ParseJsonMessage(
      R"({"HyperParameters": {"anything": "goes"}, "Environment": {"PATH": "/bin"}})", "job.json",
      &request);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(request.hyper_parameters().at("anything"), "goes");
}

TEST(ParseJsonMessageTest, ProtoFieldNamesAreAcceptedToo) {
  // protobuf's JSON parser takes both; the unknown-field check must agree.
  v1::CreateTrainingJobRequest request;
  absl::Status status =
      ParseJsonMessage(R"({"training_job_name": "a", "resource_config": {"instance_count": 2}})",
                       "job.json", &request);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(request.training_job_name(), "a");
  EXPECT_EQ(request.resource_config().instance_count(), 2);
}

TEST(ParseJsonMessageTest, IgnoreUnknownFieldsDropsThem) {
  v1::CreateTrainingJobRequest request;
  absl::Status status = ParseJsonMessage(R"({"TrainingJobName": "a", "Foo": {"Bar": 1}})",
                                         "job.json", &request, {.ignore_unknown_fields = true});
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(request.training_job_name(), "a");
}

TEST(ParseJsonMessageTest, WrongValueTypeIsReported) {
  v1::CreateTrainingJobRequest request;
  absl::Status status =
      ParseJsonMessage(R"({"ResourceConfig": {"InstanceCount": "one"}})", "job.json", &request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("job.json"), HasSubstr("instance_count"), HasSubstr("\"one\"")));
}

TEST(ParseJsonMessageTest, TopLevelMustBeAnObject) {
  v1::CreateTrainingJobRequest request;
  absl::Status status = ParseJsonMessage("[1, 2]", "job.json", &request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("expected a JSON object"));
}

TEST(ParseJsonMessageTest, SyntaxErrorNamesSourceAndPosition) {
  v1::CreateTrainingJobRequest request;
  absl::Status status = ParseJsonMessage(
      "{\n  // ok\n  \"TrainingJobName\": \"a\"\n  \"RoleArn\": \"b\"\n}", "job.json", &request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("job.json: invalid JSON"), HasSubstr("line 4, column")));
}

TEST(ParseJsonMessageTest, InvalidUtf8IsAnError) {
  v1::CreateTrainingJobRequest request;
  absl::Status status = ParseJsonMessage("{\"TrainingJobName\": \"\xff\"}", "job.json", &request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("job.json"));
}

TEST(ReadInputTest, DashReadsTheGivenStdin) {
  std::istringstream in("{\"a\": 1}");
  absl::StatusOr<std::string> text = ReadInput("-", in);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "{\"a\": 1}");
  EXPECT_EQ(InputDisplayName("-"), "<stdin>");
}

TEST(ReadInputTest, MissingFileIsNotFound) {
  std::istringstream in;
  absl::StatusOr<std::string> text = ReadInput("/nonexistent/job.json", in);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(text.status().message(), HasSubstr("/nonexistent/job.json"));
}

TEST(ReadInputTest, DirectoryIsInvalid) {
  std::istringstream in;
  absl::StatusOr<std::string> text = ReadInput(std::filesystem::temp_directory_path().string(), in);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(text.status().message(), HasSubstr("directory"));
}

TEST(ReadJsonMessageTest, ReadsFileAndNamesItInErrors) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / "dp_client_read_json_message_test.json";
  {
    std::ofstream(path)
        << "{\n  // name\n  \"TrainingJobName\": \"from-file\",\n  \"Bogus\": 1\n}\n";
  }
  std::istringstream in;
  v1::CreateTrainingJobRequest request;
  absl::Status status = ReadJsonMessage(path.string(), in, &request);
  EXPECT_THAT(status.message(), AllOf(HasSubstr(path.string()), HasSubstr("\"Bogus\"")));
  status = ReadJsonMessage(path.string(), in, &request, {.ignore_unknown_fields = true});
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(request.training_job_name(), "from-file");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace debugplane::client
