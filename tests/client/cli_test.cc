// RunCli without a server: help, usage errors, --dry-run and an unreachable
// server. Calls against a server are in cli_fake_server_test.cc.

#include "client/cli/cli.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "debugplane/v1/training_job.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/client/cli_test_util.h"

namespace debugplane::client {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::RunDebugplane;

// A file in the temp directory, removed at the end of the test.
class TempFile {
 public:
  explicit TempFile(const std::string& content)
      : path_(std::filesystem::temp_directory_path() /
              ("dp_cli_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++) +
               ".json")) {
    std::ofstream(path_) << content;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

TEST(CliHelpTest, MainHelpListsCommandsAndExitCodes) {
  testing::CliResult result = RunDebugplane({"--help"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_THAT(
      result.out,
      AllOf(HasSubstr("--server"), HasSubstr("DEBUGPLANE_SERVER"), HasSubstr("--timeout"),
            HasSubstr("--tls"), HasSubstr("--ca-cert"), HasSubstr("create"), HasSubstr("describe"),
            HasSubstr("list"), HasSubstr("update"), HasSubstr("stop"), HasSubstr("delete"),
            HasSubstr("watch"), HasSubstr("Exit codes:"), HasSubstr("3  INVALID_ARGUMENT"),
            HasSubstr("7  UNAVAILABLE or DEADLINE_EXCEEDED")));
  EXPECT_THAT(result.err, IsEmpty());
}

TEST(CliHelpTest, CreateHelpExplainsTheFile) {
  testing::CliResult result = RunDebugplane({"create", "--help"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_THAT(result.out, AllOf(HasSubstr("--file"), HasSubstr("--name"),
                                HasSubstr("--cli-input-json"), HasSubstr("// comments")));
}

TEST(CliUsageTest, NoCommandIsAUsageError) {
  testing::CliResult result = RunDebugplane({});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("error: "));
}

TEST(CliUsageTest, MissingNameIsAUsageError) {
  for (const char* command : {"describe", "stop", "delete", "watch", "update"}) {
    testing::CliResult result = RunDebugplane({command});
    EXPECT_EQ(result.exit_code, 2) << command;
    EXPECT_THAT(result.err, AllOf(HasSubstr("NAME is required"),
                                  HasSubstr(std::string("debugplane ") + command + " --help")))
        << command;
  }
}

TEST(CliUsageTest, BadFlagsAreUsageErrors) {
  const std::vector<std::vector<std::string>> cases = {
      {"describe", "x", "--bogus"},
      {"frobnicate"},
      {"create"},  // --file is required.
      {"--output", "xml", "describe", "x"},
      {"--timeout", "0", "describe", "x"},
      {"--timeout", "soon", "describe", "x"},
      {"list", "--status", "Running"},
      {"list", "--sort-by", "name"},
      {"list", "--sort-order", "Up"},
      {"list", "--max-results", "0"},
      {"list", "--max-results", "101"},
      {"list", "--created-after", "yesterday"},
      {"list", "--created-before", "2024-13-01T00:00:00Z"},
      {"update", "x", "--interval", "-5"},
      {"--ca-cert", "/nonexistent/ca.pem", "describe", "x"},
  };
  for (const auto& args : cases) {
    testing::CliResult result = RunDebugplane(args);
    EXPECT_EQ(result.exit_code, 2) << ::testing::PrintToString(args);
    EXPECT_THAT(result.err, HasSubstr("error: ")) << ::testing::PrintToString(args);
    EXPECT_THAT(result.out, IsEmpty()) << ::testing::PrintToString(args);
  }
}

TEST(CliUsageTest, MissingInputFileIsAUsageError) {
  testing::CliResult result = RunDebugplane({"create", "--file", "/nonexistent/job.json"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.err, "error: /nonexistent/job.json: no such file\n");
}

TEST(CliUsageTest, InvalidJsonIsAUsageErrorWithPosition) {
  TempFile file("{\n  \"TrainingJobName\": \"a\",\n  oops\n}\n");
  testing::CliResult result = RunDebugplane({"create", "--file", file.path()});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, AllOf(HasSubstr(file.path()), HasSubstr("line 3, column")));
}

TEST(CliUsageTest, UnknownFieldIsAUsageErrorNamingIt) {
  testing::CliResult result = RunDebugplane({"create", "--file", "-", "--dry-run"},
                                            R"({"TrainingJobName": "a", "Tagz": []})");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, AllOf(HasSubstr("<stdin>"), HasSubstr("\"Tagz\"")));
}

TEST(CliUsageTest, UpdateWithNothingToChangeIsAUsageError) {
  testing::CliResult result = RunDebugplane({"update", "job", "--dry-run"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("nothing to update"));
}

TEST(CliUsageTest, ProfilingParameterMustBeKeyValue) {
  testing::CliResult result =
      RunDebugplane({"update", "job", "--profiling-parameter", "NoEquals", "--dry-run"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("\"NoEquals\" is not KEY=VALUE"));
}

TEST(CliUsageTest, CaCertThatIsNotPemIsAUsageError) {
  TempFile file("not a certificate");
  testing::CliResult result =
      RunDebugplane({"--ca-cert", file.path(), "--server", "127.0.0.1:1", "describe", "x"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("no PEM certificate"));
}

TEST(CliDryRunTest, CreatePrintsTheParsedSageMakerTemplate) {
  TempFile file(testing::SageMakerCliTemplate());
  testing::CliResult result =
      RunDebugplane({"create", "--file", file.path(), "--dry-run", "--name", "renamed-job"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  v1::CreateTrainingJobRequest request;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(result.out, &request).ok()) << result.out;
  EXPECT_EQ(request.training_job_name(), "renamed-job");
  EXPECT_EQ(request.debug_rule_configurations(0).rule_configuration_name(), "LossNotDecreasing");
  // Pretty-printed with SageMaker's member names.
  EXPECT_THAT(result.out, AllOf(HasSubstr("{\n  \"TrainingJobName\": \"renamed-job\",\n"),
                                HasSubstr("\"DebugRuleConfigurations\": [")));
}

TEST(CliDryRunTest, UpdateFlagsApplyOnTopOfTheFile) {
  testing::CliResult result =
      RunDebugplane({"update", "job-1", "--file", "-", "--interval", "100", "--profiling-parameter",
                     "DetailedProfilingConfig={\"StartStep\": 5}", "--profiling-parameter",
                     "LocalPath=/tmp/p", "--dry-run"},
                    R"({
        // The file's name loses to NAME.
        "TrainingJobName": "other",
        "ProfilerConfig": {"ProfilingIntervalInMilliseconds": 500, "S3OutputPath": "s3://b/p"},
        "ProfilerRuleConfigurations": [{"RuleConfigurationName": "CPUBottleneck"}]
      })");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  v1::UpdateTrainingJobRequest request;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(result.out, &request).ok()) << result.out;
  EXPECT_EQ(request.training_job_name(), "job-1");
  EXPECT_EQ(request.profiler_config().profiling_interval_in_milliseconds(), 100);
  EXPECT_EQ(request.profiler_config().s3_output_path(), "s3://b/p");
  EXPECT_EQ(request.profiler_config().profiling_parameters().at("DetailedProfilingConfig"),
            "{\"StartStep\": 5}");
  EXPECT_EQ(request.profiler_config().profiling_parameters().at("LocalPath"), "/tmp/p");
  EXPECT_FALSE(request.profiler_config().has_disable_profiler());
  EXPECT_EQ(request.profiler_rule_configurations_size(), 1);
  EXPECT_THAT(result.out, HasSubstr("\"ProfilingIntervalInMilliseconds\": 100"));
}

TEST(CliDryRunTest, DisableProfilerAlone) {
  testing::CliResult result = RunDebugplane({"update", "job-1", "--disable-profiler", "--dry-run"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  v1::UpdateTrainingJobRequest request;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(result.out, &request).ok());
  EXPECT_TRUE(request.profiler_config().has_disable_profiler());
  EXPECT_TRUE(request.profiler_config().disable_profiler());
  EXPECT_FALSE(request.profiler_config().has_profiling_interval_in_milliseconds());
}

TEST(CliDryRunTest, RulesOnlyUpdateSendsNoProfilerConfig) {
  testing::CliResult result = RunDebugplane(
      {"update", "job-1", "--file", "-", "--dry-run"},
      R"({"ProfilerRuleConfigurations": [{"RuleConfigurationName": "CPUBottleneck"}]})");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  v1::UpdateTrainingJobRequest request;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(result.out, &request).ok());
  EXPECT_FALSE(request.has_profiler_config());
}

TEST(CliUnreachableTest, ServerDownExitsSevenQuickly) {
  const auto start = std::chrono::steady_clock::now();
  testing::CliResult result =
      RunDebugplane({"--server", "127.0.0.1:1", "--timeout", "1", "describe", "x"});
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(result.exit_code, 7);
  EXPECT_THAT(result.err, AllOf(HasSubstr("error: UNAVAILABLE"), HasSubstr("127.0.0.1:1")));
  EXPECT_THAT(result.out, IsEmpty());
  EXPECT_LT(elapsed, std::chrono::seconds(5));
}

TEST(CliUnreachableTest, GlobalOptionsMayFollowTheCommand) {
  testing::CliResult result =
      RunDebugplane({"list", "--all", "--server", "127.0.0.1:1", "--timeout", "1"});
  EXPECT_EQ(result.exit_code, 7);
}

TEST(CliUnreachableTest, WatchFailsFastToo) {
  const auto start = std::chrono::steady_clock::now();
  testing::CliResult result = RunDebugplane({"--server", "127.0.0.1:1", "watch", "x"});
  EXPECT_EQ(result.exit_code, 7);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(CliUnreachableTest, ServerFromEnvironment) {
  ASSERT_EQ(::setenv("DEBUGPLANE_SERVER", "127.0.0.1:1", 1), 0);
  testing::CliResult result = RunDebugplane({"--timeout", "1", "stop", "x"});
  ::unsetenv("DEBUGPLANE_SERVER");
  EXPECT_EQ(result.exit_code, 7);
  EXPECT_THAT(result.err, HasSubstr("127.0.0.1:1"));
}

}  // namespace
}  // namespace debugplane::client
