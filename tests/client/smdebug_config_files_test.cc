#include "client/agent/smdebug_config_files.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "debugplane/v1/training_job.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/client/lower_case_temp_dir.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::client {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

namespace fs = std::filesystem;
using ::debugplane::testing::LowerCaseTempDir;
using ::debugplane::testing::ScopedTempDir;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The DebugHookConfig of deploy/examples/debugger-training-job.json (the
// Debugger guide's CLI template).
TEST(DebugHookConfigJsonTest, GuideExample) {
  v1::DebugHookConfig config;
  config.set_s3_output_path(
      "s3://sagemaker-us-west-2-111122223333/debugger-aws-cli-test/debug-output");
  v1::CollectionConfiguration* losses = config.add_collection_configurations();
  losses->set_collection_name("losses");
  (*losses->mutable_collection_parameters())["train.save_interval"] = "50";

  EXPECT_EQ(DebugHookConfigJson(config, "/opt/ml/output/tensors"),
            R"({
  "LocalPath": "/opt/ml/output/tensors",
  "HookParameters": {},
  "CollectionConfigurations": [
    {
      "CollectionName": "losses",
      "CollectionParameters": {
        "train.save_interval": "50"
      }
    }
  ]
}
)");
}

TEST(DebugHookConfigJsonTest, ParametersCopiedSortedAndCollectionsInOrder) {
  v1::DebugHookConfig config;
  config.set_local_path("/ignored/api/path");
  (*config.mutable_hook_parameters())["save_interval"] = "10";
  (*config.mutable_hook_parameters())["include_regex"] = ".*relu.*";
  (*config.mutable_hook_parameters())["eval.save_interval"] = "1";
  v1::CollectionConfiguration* gradients = config.add_collection_configurations();
  gradients->set_collection_name("gradients");
  (*gradients->mutable_collection_parameters())["save_interval"] = "5";
  (*gradients->mutable_collection_parameters())["reductions"] = "mean,max";
  config.add_collection_configurations()->set_collection_name("weights");

  EXPECT_EQ(DebugHookConfigJson(config, "/data/job/tensors"),
            R"({
  "LocalPath": "/data/job/tensors",
  "HookParameters": {
    "eval.save_interval": "1",
    "include_regex": ".*relu.*",
    "save_interval": "10"
  },
  "CollectionConfigurations": [
    {
      "CollectionName": "gradients",
      "CollectionParameters": {
        "reductions": "mean,max",
        "save_interval": "5"
      }
    },
    {
      "CollectionName": "weights",
      "CollectionParameters": {}
    }
  ]
}
)");
}

TEST(DebugHookConfigJsonTest, EmptyLocalPathFallsBackToConfig) {
  v1::DebugHookConfig config;
  config.set_local_path("/opt/ml/output/tensors/");
  nlohmann::json json = nlohmann::json::parse(DebugHookConfigJson(config, ""));
  EXPECT_EQ(json["LocalPath"], "/opt/ml/output/tensors/");
  EXPECT_TRUE(json["CollectionConfigurations"].is_array());
  EXPECT_TRUE(json["CollectionConfigurations"].empty());
}

// The ProfilerConfig of deploy/examples/debugger-training-job.json.
v1::ProfilerConfig GuideProfilerConfig() {
  v1::ProfilerConfig config;
  config.set_s3_output_path(
      "s3://sagemaker-us-west-2-111122223333/debugger-aws-cli-test/profiler-output");
  config.set_profiling_interval_in_milliseconds(500);
  auto& parameters = *config.mutable_profiling_parameters();
  parameters["DataloaderProfilingConfig"] =
      R"({"StartStep": 5, "NumSteps": 3, "MetricsRegex": ".*", })";
  parameters["DetailedProfilingConfig"] = R"({"StartStep": 5, "NumSteps": 3, })";
  parameters["PythonProfilingConfig"] =
      R"({"StartStep": 5, "NumSteps": 3, "ProfilerName": "cprofile", "cProfileTimer": "total_time"})";
  parameters["LocalPath"] = "/opt/ml/output/profiler/";
  return config;
}

TEST(ProfilerConfigJsonTest, GuideExample) {
  EXPECT_EQ(ProfilerConfigJson(GuideProfilerConfig(), true, "/var/lib/debugplane/job/profiler"),
            R"({
  "ProfilingParameters": {
    "ProfilerEnabled": true,
    "LocalPath": "/var/lib/debugplane/job/profiler",
    "ProfilingIntervalInMilliseconds": 500,
    "DataloaderProfilingConfig": "{\"StartStep\": 5, \"NumSteps\": 3, \"MetricsRegex\": \".*\", }",
    "DetailedProfilingConfig": "{\"StartStep\": 5, \"NumSteps\": 3, }",
    "PythonProfilingConfig": "{\"StartStep\": 5, \"NumSteps\": 3, \"ProfilerName\": \"cprofile\", \"cProfileTimer\": \"total_time\"}"
  }
}
)");
}

TEST(ProfilerConfigJsonTest, EmptyLocalPathKeepsTheParameter) {
  nlohmann::json json = nlohmann::json::parse(ProfilerConfigJson(GuideProfilerConfig(), true, ""));
  EXPECT_EQ(json["ProfilingParameters"]["LocalPath"], "/opt/ml/output/profiler/");
}

TEST(ProfilerConfigJsonTest, NumericParametersBecomeNumbersOthersStayStrings) {
  v1::ProfilerConfig config;
  auto& parameters = *config.mutable_profiling_parameters();
  parameters["RotateMaxFileSizeInBytes"] = "10485760";
  parameters["RotateFileCloseIntervalInSeconds"] = "0.5";
  parameters["FileOpenFailThreshold"] = "lots";  // Not a number: kept as sent.
  parameters["DetailedProfilingConfig"] = R"({"StartStep": 5, "NumSteps": 3})";
  parameters["SomeFutureKey"] = "42";       // Unknown keys are copied as strings.
  parameters["ProfilerEnabled"] = "false";  // The argument decides.

  EXPECT_EQ(ProfilerConfigJson(config, true, "/p"), R"({
  "ProfilingParameters": {
    "ProfilerEnabled": true,
    "LocalPath": "/p",
    "ProfilingIntervalInMilliseconds": 500,
    "DetailedProfilingConfig": "{\"StartStep\": 5, \"NumSteps\": 3}",
    "FileOpenFailThreshold": "lots",
    "RotateFileCloseIntervalInSeconds": 0.5,
    "RotateMaxFileSizeInBytes": 10485760,
    "SomeFutureKey": "42"
  }
}
)");
}

TEST(ProfilerConfigJsonTest, IntervalFromTypedFieldThenParameterThenDefault) {
  v1::ProfilerConfig config;
  (*config.mutable_profiling_parameters())["ProfilingIntervalInMilliseconds"] = "200";
  auto interval = [&] {
    return nlohmann::json::parse(ProfilerConfigJson(
        config, true, "/p"))["ProfilingParameters"]["ProfilingIntervalInMilliseconds"];
  };
  EXPECT_EQ(interval(), 200);
  config.set_profiling_interval_in_milliseconds(100);
  EXPECT_EQ(interval(), 100);
  config.clear_profiling_interval_in_milliseconds();
  config.clear_profiling_parameters();
  EXPECT_EQ(interval(), 500);
  EXPECT_TRUE(interval().is_number_integer());
}

TEST(ProfilerConfigJsonTest, DisabledFormIsExact) {
  constexpr char kDisabled[] = R"({
  "ProfilingParameters": {
    "ProfilerEnabled": false
  }
}
)";
  v1::ProfilerConfig config = GuideProfilerConfig();
  EXPECT_EQ(ProfilerConfigJson(config, false, "/p"), kDisabled);
  config.set_disable_profiler(true);
  EXPECT_EQ(ProfilerConfigJson(config, true, "/p"), kDisabled);
}

TEST(WriteFileAtomicallyTest, CreatesParentsAndReplacesContents) {
  ScopedTempDir dir;
  std::string path = dir.path().string() + "/a/b/profilerconfig.json";
  ASSERT_TRUE(WriteFileAtomically(path, "first\n").ok());
  EXPECT_EQ(ReadAll(path), "first\n");
  ASSERT_TRUE(WriteFileAtomically(path, "second, longer\n").ok());
  EXPECT_EQ(ReadAll(path), "second, longer\n");
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::others_read);
  // No temporary files left behind.
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir.path().string() + "/a/b"))
    ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(WriteFileAtomicallyTest, ReaderNeverSeesAPartialDocument) {
  ScopedTempDir dir;
  const std::string path = dir.path().string() + "/profilerconfig.json";
  // Two documents of different sizes, so a torn or truncated read shows.
  v1::ProfilerConfig small;
  v1::ProfilerConfig large = GuideProfilerConfig();
  for (int i = 0; i < 50; ++i) {
    (*large.mutable_profiling_parameters())[absl::StrCat("Padding", i)] = std::string(100, 'x');
  }
  const std::string documents[2] = {ProfilerConfigJson(small, true, "/p"),
                                    ProfilerConfigJson(large, true, "/p")};
  ASSERT_TRUE(WriteFileAtomically(path, documents[0]).ok());

  std::atomic<bool> done{false};
  std::atomic<int> reads{0};
  std::atomic<int> bad{0};
  std::string first_bad;
  std::thread reader([&] {
    while (!done.load(std::memory_order_acquire)) {
      std::string text = ReadAll(path);
      reads.fetch_add(1, std::memory_order_relaxed);
      if (text != documents[0] && text != documents[1]) {
        if (bad.fetch_add(1) == 0) first_bad = text;
      }
    }
  });
  for (int i = 0; i < 1000; ++i) {
    absl::Status status = WriteFileAtomically(path, documents[i % 2]);
    ASSERT_TRUE(status.ok()) << status;
  }
  done.store(true, std::memory_order_release);
  reader.join();
  EXPECT_EQ(bad.load(), 0) << "first bad read (" << first_bad.size() << " bytes): " << first_bad;
  EXPECT_GT(reads.load(), 0);
  EXPECT_TRUE(nlohmann::json::parse(ReadAll(path)).is_object());
}

TEST(WriteFileAtomicallyTest, UnwritableDirectoryErrorNamesThePath) {
  ScopedTempDir dir;
  // A regular file where a directory should be: fails even for root.
  const std::string blocker = dir.path().string() + "/not-a-directory";
  std::ofstream(blocker) << "x";
  const std::string path = blocker + "/config/debughookconfig.json";
  absl::Status status = WriteFileAtomically(path, "{}");
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), AllOf(HasSubstr(path), HasSubstr("Not a directory")));

  if (geteuid() != 0) {  // Permission bits do not stop root.
    const std::string read_only = dir.path().string() + "/ro";
    fs::create_directory(read_only);
    fs::permissions(read_only, fs::perms::owner_read | fs::perms::owner_exec);
    const std::string ro_path = read_only + "/profilerconfig.json";
    status = WriteFileAtomically(ro_path, "{}");
    EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
    EXPECT_THAT(status.message(), AllOf(HasSubstr(ro_path), HasSubstr("Permission denied")));
    fs::permissions(read_only, fs::perms::owner_all);
  }
}

TEST(WriteFileAtomicallyTest, EmptyPathIsInvalid) {
  EXPECT_EQ(WriteFileAtomically("", "x").code(), absl::StatusCode::kInvalidArgument);
}

// --- Paths that survive smdebug's lower-casing ------------------------------

// What smdebug does with profilerconfig.json (profiler_config_parser.py
// lower-cases the whole text, then reads "localpath") and where it then
// writes a framework timeline (TraceFileLocation: <localpath>/framework/
// pevents/<YYYYMMDDHH>/<end_us>_<pid>-<host>_pythontimeline.json).
// Returns the path it wrote, as smdebug names it.
std::string WriteTimelineAsSmdebugDoes(const std::string& profilerconfig_json) {
  std::string lowered = profilerconfig_json;
  for (char& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const nlohmann::json config = nlohmann::json::parse(lowered)["profilingparameters"];
  const fs::path dir =
      fs::path(config["localpath"].get<std::string>()) / "framework" / "pevents" / "2024050112";
  fs::create_directories(dir);
  const fs::path file = dir / "1714564801000000_4242-host_pythontimeline.json";
  std::ofstream(file) << "[\n";
  return file.string();
}

TEST(SurvivesLowerCasingTest, OnlyAsciiWithoutCapitals) {
  EXPECT_TRUE(SurvivesLowerCasing("/data/mlp-upper/profiler-output_1.x"));
  EXPECT_TRUE(SurvivesLowerCasing(""));
  EXPECT_FALSE(SurvivesLowerCasing("/data/MLP-Upper/profiler"));
  EXPECT_FALSE(SurvivesLowerCasing("/data/Z"));
  // Python's str.lower() changes non-ASCII letters too ("\xc3\x89" is É).
  EXPECT_FALSE(SurvivesLowerCasing("/data/\xc3\x89t\xc3\xa9"));
}

TEST(LowerCaseAliasRootTest, UnderTheTempDirUnlessItHasCapitals) {
  EXPECT_EQ(LowerCaseAliasRoot(""), "/tmp/debugplane-agent/smdebug-paths");
  EXPECT_EQ(LowerCaseAliasRoot("/var/tmp/"), "/var/tmp/debugplane-agent/smdebug-paths");
  EXPECT_EQ(LowerCaseAliasRoot("/home/Me/tmp"), "/tmp/debugplane-agent/smdebug-paths");
  EXPECT_EQ(LowerCaseAliasRoot("relative"), "/tmp/debugplane-agent/smdebug-paths");
}

TEST(LowerCaseAliasTest, ALowerCasePathIsUsedAsIsAndNothingIsCreated) {
  LowerCaseTempDir dir;
  const std::string real = (dir.path() / "mlp-lower" / "profiler").string();
  const fs::path root = dir.path() / "aliases";
  absl::StatusOr<std::string> alias = LowerCaseAlias(real, root.string());
  ASSERT_TRUE(alias.ok()) << alias.status();
  EXPECT_EQ(*alias, real);
  EXPECT_FALSE(fs::exists(root));
  EXPECT_FALSE(fs::exists(real));
}

TEST(LowerCaseAliasTest, AJobNameInCapitalsGetsALowerCaseSymlinkToTheRealDirectory) {
  ScopedTempDir data;  // Its own name may have capitals too.
  LowerCaseTempDir agent;
  const fs::path real = data.path() / "MLP-Upper" / "profiler-output";
  const fs::path root = agent.path() / "smdebug-paths";
  absl::StatusOr<std::string> alias = LowerCaseAlias(real.string(), root.string());
  ASSERT_TRUE(alias.ok()) << alias.status();
  EXPECT_TRUE(SurvivesLowerCasing(*alias)) << *alias;
  EXPECT_EQ(fs::path(*alias).parent_path(), root);
  EXPECT_EQ(fs::path(*alias).filename().string().size(), 16u);
  EXPECT_TRUE(fs::is_symlink(*alias));
  EXPECT_EQ(fs::read_symlink(*alias), real);
  // Created, so that smdebug's makedirs below the symlink works.
  EXPECT_TRUE(fs::is_directory(real));
  EXPECT_TRUE(fs::equivalent(*alias, real));
}

TEST(LowerCaseAliasTest, SmdebugWritesItsTimelineIntoTheRealDirectory) {
  ScopedTempDir data;
  LowerCaseTempDir agent;
  const fs::path real = data.path() / "MLP-Upper" / "profiler-output";
  absl::StatusOr<std::string> alias =
      LowerCaseAlias(real.string(), (agent.path() / "smdebug-paths").string());
  ASSERT_TRUE(alias.ok()) << alias.status();
  v1::ProfilerConfig config;
  config.set_s3_output_path(real.string());
  const std::string written = WriteTimelineAsSmdebugDoes(ProfilerConfigJson(config, true, *alias));
  EXPECT_EQ(written.rfind(*alias, 0), 0u) << written;
  // Where the server reads ProfilerConfig.S3OutputPath:
  EXPECT_TRUE(fs::is_regular_file(real / "framework" / "pevents" / "2024050112" /
                                  "1714564801000000_4242-host_pythontimeline.json"));
  EXPECT_FALSE(fs::exists(data.path() / "mlp-upper"));
}

TEST(LowerCaseAliasTest, OneAliasPerDirectoryReusedAndRepaired) {
  ScopedTempDir data;
  LowerCaseTempDir agent;
  const std::string root = (agent.path() / "smdebug-paths").string();
  const fs::path real = data.path() / "Job-A" / "profiler";
  absl::StatusOr<std::string> first = LowerCaseAlias(real.string(), root);
  ASSERT_TRUE(first.ok()) << first.status();
  // The same directory, however spelled, has the same alias (a second run,
  // or a second agent of the job on this host).
  EXPECT_EQ(LowerCaseAlias(real.string() + "/", root).value_or(""), *first);
  EXPECT_EQ(LowerCaseAlias((real / ".." / "profiler").string(), root).value_or(""), *first);
  // Another directory has another one.
  absl::StatusOr<std::string> other = LowerCaseAlias((data.path() / "Job-B").string(), root);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(*other, *first);
  // An alias that points elsewhere (a directory moved, a hand-made link) is
  // replaced.
  fs::remove(*first);
  fs::create_directory_symlink(data.path(), *first);
  EXPECT_EQ(LowerCaseAlias(real.string(), root).value_or(""), *first);
  EXPECT_EQ(fs::read_symlink(*first), real);
  // Nothing else is left in the alias directory (no temporary links).
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(root)) ++entries;
  EXPECT_EQ(entries, 2);
}

TEST(LowerCaseAliasTest, ARelativeDirectoryIsLinkedByItsAbsolutePath) {
  LowerCaseTempDir agent;
  const fs::path cwd = fs::current_path();
  ScopedTempDir data;
  fs::current_path(data.path());
  absl::StatusOr<std::string> alias =
      LowerCaseAlias("Relative/Profiler", (agent.path() / "smdebug-paths").string());
  fs::current_path(cwd);
  ASSERT_TRUE(alias.ok()) << alias.status();
  EXPECT_EQ(fs::read_symlink(*alias), data.path() / "Relative" / "Profiler");
}

TEST(LowerCaseAliasTest, ErrorsNameThePathAndTheCause) {
  ScopedTempDir data;
  LowerCaseTempDir agent;
  const std::string real = (data.path() / "MLP-Upper").string();

  absl::StatusOr<std::string> alias = LowerCaseAlias(real, "/tmp/Aliases");
  EXPECT_EQ(alias.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(alias.status().message(),
              HasSubstr("\"/tmp/Aliases\" must be an absolute path that lower-casing leaves"));
  EXPECT_EQ(LowerCaseAlias(real, "aliases").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LowerCaseAlias("", agent.path().string()).status().code(),
            absl::StatusCode::kInvalidArgument);

  const fs::path file = agent.path() / "file";
  std::ofstream(file) << "x";
  alias = LowerCaseAlias(real, (file / "aliases").string());
  EXPECT_FALSE(alias.ok());
  EXPECT_THAT(alias.status().message(),
              HasSubstr("cannot create the directory of lower-case aliases " +
                        (file / "aliases").string()));

  const fs::path blocked = data.path() / "File";
  std::ofstream(blocked) << "x";
  alias = LowerCaseAlias((blocked / "Profiler").string(), agent.path().string());
  EXPECT_FALSE(alias.ok());
  EXPECT_THAT(alias.status().message(), HasSubstr("cannot create the profiler output directory " +
                                                  (blocked / "Profiler").string()));
}

}  // namespace
}  // namespace debugplane::client
