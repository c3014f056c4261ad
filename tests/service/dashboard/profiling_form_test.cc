// The profiling form -> UpdateTrainingJob's ProfilerConfigForUpdate, and
// errors named by the form's members.

#include "service/dashboard/profiling_form.h"

#include "absl/strings/str_cat.h"
#include "core/jobs/profiling_parameters.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace debugplane::service::dashboard {
namespace {

using ::testing::HasSubstr;

v1::UpdateTrainingJobRequest ParseOk(const std::string& body) {
  FormError error;
  absl::StatusOr<v1::UpdateTrainingJobRequest> request = ParseProfilingForm(body, "job-1", &error);
  EXPECT_TRUE(request.ok()) << request.status();
  return request.ok() ? *request : v1::UpdateTrainingJobRequest();
}

FormError ParseError(const std::string& body) {
  FormError error;
  absl::StatusOr<v1::UpdateTrainingJobRequest> request = ParseProfilingForm(body, "job-1", &error);
  EXPECT_FALSE(request.ok()) << body;
  if (!request.ok()) {
    EXPECT_EQ(request.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(request.status().message(), error.message);
  }
  return error;
}

TEST(ProfilingFormTest, TheFormBecomesTheSageMakerProfilerConfig) {
  const v1::UpdateTrainingJobRequest request = ParseOk(R"({
      "profilingEnabled": true, "monitoringIntervalMillis": 1000,
      "detailedProfiling": {"startStep": 5, "numSteps": 3},
      "dataloaderProfiling": {"startTimeSeconds": 1700000000.75, "durationSeconds": 10,
                              "metricsRegex": ".*"},
      "pythonProfiling": {"startStep": 2, "numSteps": 1, "profilerName": "cprofile",
                          "cprofileTimer": "cpu_time"}})");
  EXPECT_EQ(request.training_job_name(), "job-1");
  const v1::ProfilerConfigForUpdate& config = request.profiler_config();
  EXPECT_FALSE(config.has_disable_profiler());
  EXPECT_EQ(config.profiling_interval_in_milliseconds(), 1000);
  const auto& parameters = config.profiling_parameters();
  ASSERT_EQ(parameters.size(), 3u);
  EXPECT_EQ(nlohmann::json::parse(parameters.at("DetailedProfilingConfig")),
            nlohmann::json::parse(R"({"StartStep": 5, "NumSteps": 3})"));
  EXPECT_EQ(nlohmann::json::parse(parameters.at("DataloaderProfilingConfig")),
            nlohmann::json::parse(
                R"({"StartTimeInSecSinceEpoch": 1700000000, "DurationInSeconds": 10,
                    "MetricsRegex": ".*"})"));
  EXPECT_EQ(nlohmann::json::parse(parameters.at("PythonProfilingConfig")),
            nlohmann::json::parse(R"({"StartStep": 2, "NumSteps": 1, "ProfilerName": "cprofile",
                                      "cProfileTimer": "cpu_time"})"));
  // What smdebug will read passes the server's own check of the parameter.
  for (const auto& [key, value] : parameters) {
    EXPECT_TRUE(core::CheckProfilingParameter(key, value).ok()) << key << " " << value;
  }
}

TEST(ProfilingFormTest, NullsChangeNothingAndDisablingGoesAlone) {
  const v1::UpdateTrainingJobRequest unchanged = ParseOk(
      R"({"monitoringIntervalMillis": null, "detailedProfiling": null, "pythonProfiling": null})");
  EXPECT_FALSE(unchanged.profiler_config().has_profiling_interval_in_milliseconds());
  EXPECT_TRUE(unchanged.profiler_config().profiling_parameters().empty());

  const v1::UpdateTrainingJobRequest off = ParseOk(
      R"({"profilingEnabled": false, "monitoringIntervalMillis": 500,
          "detailedProfiling": {"startStep": 1}})");
  EXPECT_TRUE(off.profiler_config().has_disable_profiler());
  EXPECT_TRUE(off.profiler_config().disable_profiler());
  EXPECT_FALSE(off.profiler_config().has_profiling_interval_in_milliseconds());
  EXPECT_TRUE(off.profiler_config().profiling_parameters().empty());
}

TEST(ProfilingFormTest, ErrorsNameTheFormMember) {
  EXPECT_EQ(ParseError(R"({"monitoringIntervalMillis": "fast"})").field,
            "monitoringIntervalMillis");
  EXPECT_EQ(ParseError(R"({"monitoringIntervalMillis": 2.5})").field, "monitoringIntervalMillis");
  EXPECT_EQ(ParseError(R"({"detailedProfiling": {"startStep": 1, "numSteps": 0}})").field,
            "detailedProfiling.numSteps");
  EXPECT_EQ(ParseError(R"({"detailedProfiling": {"startStep": -1}})").field,
            "detailedProfiling.startStep");
  EXPECT_EQ(ParseError(R"({"detailedProfiling": {"numSteps": 2}})").field,
            "detailedProfiling.startStep");
  EXPECT_EQ(ParseError(R"({"dataloaderProfiling": {"durationSeconds": 2}})").field,
            "dataloaderProfiling.startTimeSeconds");
  EXPECT_EQ(ParseError(R"({"detailedProfiling": {"startStep": 1, "startTimeSeconds": 5}})").field,
            "detailedProfiling");
  EXPECT_EQ(ParseError(R"({"detailedProfiling": {}})").field, "detailedProfiling.startStep");
  EXPECT_EQ(ParseError(R"({"detailedProfiling": 7})").field, "detailedProfiling");
  EXPECT_EQ(ParseError(R"({"detailedProfiling": {"startStep": 1, "metricsRegex": "x"}})").field,
            "detailedProfiling.metricsRegex");
  EXPECT_EQ(ParseError(R"({"pythonProfiling": {"startStep": 1, "profilerName": "perf"}})").field,
            "pythonProfiling.profilerName");
  EXPECT_EQ(ParseError(R"({"pythonProfiling": {"startStep": 1, "profilerName": "pyinstrument",
                           "cprofileTimer": "cpu_time"}})")
                .field,
            "pythonProfiling.cprofileTimer");
  EXPECT_EQ(ParseError(R"({"profilingEnabled": "yes"})").field, "profilingEnabled");
  const FormError unknown = ParseError(R"({"sampleRate": 3})");
  EXPECT_EQ(unknown.field, "sampleRate");
  EXPECT_THAT(unknown.message, HasSubstr("monitoringIntervalMillis"));
  EXPECT_EQ(ParseError("[1, 2]").field, "");
  EXPECT_EQ(ParseError("{").field, "");
  EXPECT_EQ(ParseError(std::string(5000, ' ') + "{}").field, "");
}

// A section the form accepts member by member can still make a parameter
// UpdateTrainingJob refuses (found by dashboard_profiling_form_fuzzer): it is
// refused here, naming the member that made it so.
TEST(ProfilingFormTest, AMetricsRegexTooLongForTheParameterIsRefusedNamingIt) {
  const std::string regex(300, 'r');
  const FormError error = ParseError(
      absl::StrCat(R"({"dataloaderProfiling": {"startStep": 5, "numSteps": 3, "metricsRegex": ")",
                   regex, R"("}})"));
  EXPECT_EQ(error.field, "dataloaderProfiling.metricsRegex");
  EXPECT_THAT(error.message, HasSubstr("DataloaderProfilingConfig"));
  EXPECT_THAT(error.message, HasSubstr("at most 256"));
  // A regex that fits is accepted, and passes the server's check.
  const std::string fits(200, 'r');
  v1::UpdateTrainingJobRequest request = ParseOk(
      absl::StrCat(R"({"dataloaderProfiling": {"startStep": 5, "numSteps": 3, "metricsRegex": ")",
                   fits, R"("}})"));
  const auto& parameters = request.profiler_config().profiling_parameters();
  ASSERT_EQ(parameters.count("DataloaderProfilingConfig"), 1u);
  EXPECT_TRUE(core::CheckProfilingParameter("DataloaderProfilingConfig",
                                            parameters.at("DataloaderProfilingConfig"))
                  .ok());
}

TEST(ProfilingFormTest, UpdateTrainingJobViolationsMapBackToTheForm) {
  EXPECT_EQ(FormFieldOf({"ProfilerConfig.ProfilingIntervalInMilliseconds", "300 is not allowed"}),
            "monitoringIntervalMillis");
  EXPECT_EQ(FormFieldOf({"ProfilerConfig.DisableProfiler", "cannot be combined"}),
            "profilingEnabled");
  EXPECT_EQ(FormFieldOf({"ProfilerConfig.ProfilingParameters.DetailedProfilingConfig",
                         "NumSteps must be an integer of at least 1, not 0"}),
            "detailedProfiling.numSteps");
  EXPECT_EQ(FormFieldOf({"ProfilerConfig.ProfilingParameters.PythonProfilingConfig",
                         "gives both a step range"}),
            "pythonProfiling");
  EXPECT_EQ(FormFieldOf({"TrainingJobName", "bad"}), "");
}

}  // namespace
}  // namespace debugplane::service::dashboard
