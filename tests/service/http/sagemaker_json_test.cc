#include "service/http/sagemaker_json.h"

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "debugplane/v1/training_job.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "service/auth/auth.h"

namespace debugplane::service::http {
namespace {

using ::testing::HasSubstr;
using ::testing::Optional;

std::string TemplateJson() {
  std::ifstream in(std::string(DP_TEST_DATA_DIR) + "/sagemaker/create-training-job-template.jsonc");
  std::stringstream doc;
  doc << in.rdbuf();
  std::string json;
  for (absl::string_view line : absl::StrSplit(doc.str(), '\n')) {
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "//")) continue;
    absl::StrAppend(&json, line, "\n");
  }
  return json;
}

TEST(SageMakerJsonTest, ParsesTheDebuggerTemplateAsProtobufJsonDoes) {
  v1::CreateTrainingJobRequest expected;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(TemplateJson(), &expected).ok());
  v1::CreateTrainingJobRequest parsed;
  ASSERT_TRUE(ParseSageMakerJson(TemplateJson(), &parsed).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(parsed, expected))
      << parsed.DebugString() << "\nvs\n"
      << expected.DebugString();
  EXPECT_EQ(parsed.profiler_config().profiling_interval_in_milliseconds(), 500);
  EXPECT_EQ(parsed.debug_rule_configurations(0).rule_parameters().at("rule_to_invoke"),
            "LossNotDecreasing");
}

TEST(SageMakerJsonTest, TimestampsAreEpochSecondsWithFractions) {
  v1::ListTrainingJobsRequest request;
  ASSERT_TRUE(ParseSageMakerJson(
                  R"({"CreationTimeAfter": 1700000000.25, "CreationTimeBefore": 1700000100,
                      "StatusEquals": "Stopped", "MaxResults": 5})",
                  &request)
                  .ok());
  EXPECT_EQ(request.creation_time_after().seconds(), 1700000000);
  EXPECT_EQ(request.creation_time_after().nanos(), 250000000);
  EXPECT_EQ(request.creation_time_before().seconds(), 1700000100);
  EXPECT_EQ(request.status_equals(), v1::TrainingJobStatus::Stopped);
  EXPECT_EQ(request.max_results(), 5);
}

// SageMaker's timestamps carry milliseconds; a finer fraction is rounded on the
// way in so that what the server echoes back is the filter it used (found by
// sagemaker_json_fuzzer: 17000.000015 came back as 17000).
TEST(SageMakerJsonTest, TimestampsKeepMillisecondsAndRoundTrip) {
  const auto parse = [](absl::string_view json) {
    v1::ListTrainingJobsRequest request;
    EXPECT_TRUE(ParseSageMakerJson(json, &request).ok()) << json;
    return request;
  };
  const v1::ListTrainingJobsRequest tiny = parse(R"({"CreationTimeAfter": 17000.000015})");
  EXPECT_EQ(tiny.creation_time_after().seconds(), 17000);
  EXPECT_EQ(tiny.creation_time_after().nanos(), 0);
  const v1::ListTrainingJobsRequest carried = parse(R"({"CreationTimeAfter": 1.9999})");
  EXPECT_EQ(carried.creation_time_after().seconds(), 2);
  EXPECT_EQ(carried.creation_time_after().nanos(), 0);
  const v1::ListTrainingJobsRequest negative = parse(R"({"CreationTimeAfter": -0.5})");
  EXPECT_EQ(negative.creation_time_after().seconds(), -1);
  EXPECT_EQ(negative.creation_time_after().nanos(), 500000000);
  for (const v1::ListTrainingJobsRequest& request : {tiny, carried, negative}) {
    v1::ListTrainingJobsRequest again;
    ASSERT_TRUE(ParseSageMakerJson(ToSageMakerJson(request), &again).ok());
    EXPECT_EQ(again.creation_time_after().seconds(), request.creation_time_after().seconds());
    EXPECT_EQ(again.creation_time_after().nanos(), request.creation_time_after().nanos());
  }
}

TEST(SageMakerJsonTest, PrintsTimestampsAndInt64AsNumbersAndEnumsAsNames) {
  v1::DescribeTrainingJobResponse job;
  job.set_training_job_name("j");
  job.set_training_job_status(v1::TrainingJobStatus::InProgress);
  job.mutable_creation_time()->set_seconds(1700000000);
  job.mutable_creation_time()->set_nanos(123000000);
  job.mutable_last_modified_time()->set_seconds(1700000001);
  job.set_config_version(3);
  job.mutable_profiler_config()->set_profiling_interval_in_milliseconds(500);
  (*job.mutable_hyper_parameters())["a"] = "b";
  auto* rule = job.add_debug_rule_evaluation_statuses();
  rule->set_rule_configuration_name("Loss");
  rule->set_last_evaluated_step(int64_t{1} << 40);
  const nlohmann::json printed = nlohmann::json::parse(ToSageMakerJson(job));
  EXPECT_EQ(printed["TrainingJobStatus"], "InProgress");
  EXPECT_TRUE(printed["CreationTime"].is_number_float());
  EXPECT_DOUBLE_EQ(printed["CreationTime"].get<double>(), 1700000000.123);
  EXPECT_TRUE(printed["LastModifiedTime"].is_number_integer());
  EXPECT_EQ(printed["ConfigVersion"], 3);
  EXPECT_EQ(printed["ProfilerConfig"]["ProfilingIntervalInMilliseconds"], 500);
  EXPECT_EQ(printed["HyperParameters"]["a"], "b");
  EXPECT_EQ(printed["DebugRuleEvaluationStatuses"][0]["LastEvaluatedStep"], int64_t{1} << 40);
  // Unset members (proto3 defaults) are left out, as SageMaker leaves out absent ones.
  EXPECT_FALSE(printed.contains("SecondaryStatus"));
  EXPECT_FALSE(printed.contains("FailureReason"));
  EXPECT_FALSE(printed.contains("InputDataConfig"));
}

TEST(SageMakerJsonTest, RoundTripsAPrintedMessage) {
  v1::CreateTrainingJobRequest request;
  ASSERT_TRUE(ParseSageMakerJson(TemplateJson(), &request).ok());
  v1::CreateTrainingJobRequest again;
  ASSERT_TRUE(ParseSageMakerJson(ToSageMakerJson(request), &again).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(request, again));
}

struct Refusal {
  std::string body;
  std::string code;
  std::string names;
};

class SageMakerJsonRefusalTest : public ::testing::TestWithParam<Refusal> {};

TEST_P(SageMakerJsonRefusalTest, NamesTheMemberWithTheAwsCode) {
  v1::CreateTrainingJobRequest request;
  const absl::Status status = ParseSageMakerJson(GetParam().body, &request);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(auth::AwsErrorCode(status), Optional(GetParam().code)) << status;
  EXPECT_THAT(status.message(), HasSubstr(GetParam().names));
}

INSTANTIATE_TEST_SUITE_P(
    Bodies, SageMakerJsonRefusalTest,
    ::testing::Values(
        Refusal{"{not json", "SerializationException", "not JSON"},
        Refusal{"", "SerializationException", "not JSON"},
        Refusal{"[1]", "SerializationException", "the body: expected an object"},
        // Valid JSON that nlohmann cannot hold (found by sagemaker_json_fuzzer:
        // it threw out_of_range past the parser).
        Refusal{R"({"TrainingJobName": 1e999})", "SerializationException", "number overflow"},
        Refusal{R"({"TrainingJobName": 5})", "SerializationException", "TrainingJobName"},
        Refusal{R"({"ProfilerConfig": {"ProfilingIntervalInMilliseconds": "500"}})",
                "SerializationException", "ProfilerConfig.ProfilingIntervalInMilliseconds"},
        Refusal{R"({"ProfilerConfig": {"ProfilingIntervalInMilliseconds": 1.5}})",
                "SerializationException", "ProfilerConfig.ProfilingIntervalInMilliseconds"},
        Refusal{R"({"ResourceConfig": {"InstanceCount": 4294967296}})", "SerializationException",
                "ResourceConfig.InstanceCount"},
        Refusal{R"({"DebugRuleConfigurations": [{}, {"RuleParameters": {"a": 1}}]})",
                "SerializationException", "DebugRuleConfigurations[1].RuleParameters[\"a\"]"},
        Refusal{R"({"Tags": {"Key": "a"}})", "SerializationException", "Tags: expected a list"},
        Refusal{R"({"RemoteDebugConfig": {}})", "ValidationException", "RemoteDebugConfig"},
        Refusal{R"({"DebugHookConfig": {"S3OutputPth": "s3://b"}})", "ValidationException",
                "DebugHookConfig.S3OutputPth"},
        Refusal{R"({"training_job_name": "x"})", "ValidationException", "training_job_name"}));

TEST(SageMakerJsonTest, RefusesEnumValuesOutsideTheSet) {
  v1::ListTrainingJobsRequest request;
  for (const char* body : {R"({"StatusEquals": "Running"})",
                           R"({"StatusEquals": "TRAINING_JOB_STATUS_UNSPECIFIED"})"}) {
    const absl::Status status = ParseSageMakerJson(body, &request);
    EXPECT_THAT(auth::AwsErrorCode(status), Optional(std::string("ValidationException")));
    EXPECT_THAT(status.message(), HasSubstr("StatusEquals"));
    EXPECT_THAT(status.message(), HasSubstr("InProgress, Completed"));
  }
}

TEST(SageMakerJsonTest, NullMembersAreAbsent) {
  v1::ListTrainingJobsRequest request;
  ASSERT_TRUE(ParseSageMakerJson(R"({"NameContains": null, "MaxResults": 3})", &request).ok());
  EXPECT_EQ(request.name_contains(), "");
  EXPECT_EQ(request.max_results(), 3);
}

TEST(SageMakerJsonTest, DeepNestingInAStringFieldIsRefusedWithoutRecursion) {
  v1::DescribeTrainingJobRequest request;
  const std::string deep =
      "{\"TrainingJobName\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  const absl::Status status = ParseSageMakerJson(deep, &request);
  EXPECT_THAT(auth::AwsErrorCode(status), Optional(std::string("SerializationException")));
}

}  // namespace
}  // namespace debugplane::service::http
