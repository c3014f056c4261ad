// The CLI's JSON: SageMaker's member names with numbers as numbers (the gRPC
// JSON mapping prints 64-bit integers as strings), non-finite values as
// "nan"/"inf"/"-inf", strings left alone.

#include "client/cli/output.h"

#include <cmath>
#include <limits>
#include <string>

#include "debugplane/v1/training_job.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/wrappers.pb.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace debugplane::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::DescribeTrainingJobResponse JobWithNumbers() {
  v1::DescribeTrainingJobResponse job;
  job.set_training_job_name("MLP-Upper");
  job.set_config_version(3);
  job.mutable_profiler_config()->set_profiling_interval_in_milliseconds(500);
  (*job.mutable_profiler_config()->mutable_profiling_parameters())["RotateMaxFileSizeInBytes"] =
      "1048576";
  auto* rule = job.add_debug_rule_configurations();
  rule->set_rule_configuration_name("LossNotDecreasing");
  (*rule->mutable_rule_parameters())["num_steps"] = "10";
  auto* status = job.add_debug_rule_evaluation_statuses();
  status->set_rule_configuration_name("LossNotDecreasing");
  status->set_last_evaluated_step(149);
  job.mutable_progress_info()->set_current_step(9007199254740993);  // 2^53 + 1
  return job;
}

TEST(OutputJsonTest, SixtyFourBitIntegersAreNumbers) {
  const nlohmann::json json = nlohmann::json::parse(ToPrettyJson(JobWithNumbers()));
  EXPECT_EQ(json["ConfigVersion"], 3);
  EXPECT_EQ(json["ProfilerConfig"]["ProfilingIntervalInMilliseconds"], 500);
  EXPECT_EQ(json["DebugRuleEvaluationStatuses"][0]["LastEvaluatedStep"], 149);
  EXPECT_TRUE(json["DebugRuleEvaluationStatuses"][0]["LastEvaluatedStep"].is_number_integer());
  // Exact, not rounded to a double.
  EXPECT_EQ(json["ProgressInfo"]["CurrentStep"].get<int64_t>(), 9007199254740993);
}

TEST(OutputJsonTest, ReadProgressIsNumbers) {
  v1::DescribeTrainingJobResponse job = JobWithNumbers();
  auto* read = job.mutable_debug_rule_evaluation_statuses(0)->mutable_read_progress();
  read->set_bytes_read(5000000000);  // Beyond 32 bits.
  read->set_objects_read(301);
  read->set_last_step_read(149);
  const nlohmann::json json = nlohmann::json::parse(ToPrettyJson(job));
  const nlohmann::json& progress = json["DebugRuleEvaluationStatuses"][0]["ReadProgress"];
  EXPECT_EQ(progress["BytesRead"].get<int64_t>(), 5000000000);
  EXPECT_EQ(progress["ObjectsRead"], 301);
  EXPECT_EQ(progress["LastStepRead"], 149);
}

TEST(OutputTextTest, RuleRowsShowReadProgressWhenSomeRuleHasIt) {
  v1::DescribeTrainingJobResponse job = JobWithNumbers();
  auto* status = job.mutable_debug_rule_evaluation_statuses(0);
  status->set_rule_evaluation_status(v1::RuleEvaluationStatus::InProgress);
  EXPECT_THAT(DescribeAsText(job), HasSubstr("  LossNotDecreasing  InProgress\n"));
  status->mutable_read_progress()->set_bytes_read(40960);
  status->mutable_read_progress()->set_objects_read(12);
  status->mutable_read_progress()->set_last_step_read(9);
  EXPECT_THAT(
      DescribeAsText(job),
      HasSubstr("  LossNotDecreasing  InProgress  read 12 objects, 40960 bytes, to step 9\n"));
  auto* profiler = job.add_profiler_rule_evaluation_statuses();
  profiler->set_rule_configuration_name("CPUBottleneck");
  profiler->set_rule_evaluation_status(v1::RuleEvaluationStatus::NoIssuesFound);
  profiler->set_status_details("fine");
  profiler->mutable_read_progress()->set_bytes_read(1);
  profiler->mutable_read_progress()->set_objects_read(1);
  EXPECT_THAT(DescribeAsText(job),
              HasSubstr("  CPUBottleneck  NoIssuesFound  read 1 object, 1 byte  fine\n"));
}

TEST(OutputJsonTest, StringsWithDigitsStayStrings) {
  const std::string text = ToPrettyJson(JobWithNumbers());
  EXPECT_THAT(text, HasSubstr("\"num_steps\": \"10\""));
  EXPECT_THAT(text, HasSubstr("\"RotateMaxFileSizeInBytes\": \"1048576\""));
  EXPECT_THAT(text, HasSubstr("\"TrainingJobName\": \"MLP-Upper\""));
  EXPECT_THAT(text, HasSubstr("\"ProfilingIntervalInMilliseconds\": 500"));
  EXPECT_THAT(text, Not(HasSubstr("\"500\"")));
}

TEST(OutputJsonTest, PrettyAndLineFormsAgreeAndParseBack) {
  const v1::DescribeTrainingJobResponse job = JobWithNumbers();
  const std::string pretty = ToPrettyJson(job);
  const std::string line = ToJsonLine(job);
  EXPECT_THAT(pretty, HasSubstr("{\n  \"TrainingJobName\": \"MLP-Upper\",\n"));
  ASSERT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  EXPECT_THAT(line, HasSubstr("\"LastEvaluatedStep\":149"));
  EXPECT_EQ(nlohmann::json::parse(pretty), nlohmann::json::parse(line));
  // Scripts may feed it back to anything that takes the API's JSON.
  v1::DescribeTrainingJobResponse parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(line, &parsed).ok()) << line;
  EXPECT_EQ(parsed.SerializeAsString(), job.SerializeAsString());
}

// UninterpretedOption has every kind of number field the walk converts.
TEST(OutputJsonTest, EveryNumberKindAndNonFiniteValues) {
  google::protobuf::UninterpretedOption option;
  option.set_positive_int_value(std::numeric_limits<uint64_t>::max());
  option.set_negative_int_value(std::numeric_limits<int64_t>::min());
  option.set_double_value(-std::numeric_limits<double>::infinity());
  option.set_identifier_value("123");
  auto* name = option.add_name();
  name->set_name_part("part");
  name->set_is_extension(false);
  nlohmann::json json = nlohmann::json::parse(ToJsonLine(option));
  EXPECT_EQ(json["positiveIntValue"].get<uint64_t>(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(json["negativeIntValue"].get<int64_t>(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(json["doubleValue"], "-inf");
  EXPECT_EQ(json["identifierValue"], "123");
  EXPECT_EQ(json["name"][0]["namePart"], "part");

  option.set_double_value(std::numeric_limits<double>::infinity());
  EXPECT_EQ(nlohmann::json::parse(ToJsonLine(option))["doubleValue"], "inf");
  // 0/0 is a NaN with the sign bit set on x86, which printf spells "-nan".
  volatile double zero = 0;
  const double negative_nan = zero / zero;
  option.set_double_value(std::copysign(negative_nan, -1.0));
  EXPECT_EQ(nlohmann::json::parse(ToJsonLine(option))["doubleValue"], "nan");
  option.set_double_value(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(nlohmann::json::parse(ToJsonLine(option))["doubleValue"], "nan");
}

TEST(OutputJsonTest, WrapperTypesAreBareNumbers) {
  google::protobuf::Int64Value int64;
  int64.set_value(-42);
  EXPECT_EQ(ToJsonLine(int64), "-42\n");
  google::protobuf::UInt64Value uint64;
  uint64.set_value(42);
  EXPECT_EQ(ToJsonLine(uint64), "42\n");
  google::protobuf::DoubleValue real;
  real.set_value(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(ToJsonLine(real), "\"nan\"\n");
}

TEST(OutputJsonTest, TimestampsKeepTheirForm) {
  v1::DescribeTrainingJobResponse job;
  job.mutable_creation_time()->set_seconds(1714564800);
  EXPECT_EQ(ToJsonLine(job), "{\"CreationTime\":\"2024-05-01T12:00:00Z\"}\n");
}

}  // namespace
}  // namespace debugplane::client
