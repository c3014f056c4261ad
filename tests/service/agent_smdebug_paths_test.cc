// What smdebug does with the profilerconfig.json the agent writes, end to
// end: the real server and `debugplane-agent run` around a stand-in for
// smdebug that lower-cases the whole file, as smdebug's
// profiler_config_parser.py does, and writes a framework timeline under the
// LocalPath it read. For a job named in capitals the timeline must still land
// in ProfilerConfig.S3OutputPath, where the server's framework rules read it.

#include <cctype>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/client/lower_case_temp_dir.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/service/agent_process.h"
#include "tests/service/server_process.h"
#include "tests/service/training_job_calls.h"
#include "tests/support/wait_until.h"

namespace debugplane {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::AgentProcess;
using ::debugplane::testing::CreateJob;
using ::debugplane::testing::DescribeJob;
using ::debugplane::testing::LowerCaseTempDir;
using ::debugplane::testing::ReadFile;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::debugplane::testing::WaitUntil;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kJob[] = "MLP-Upper";
constexpr char kRulesImage[] =
    "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest";

// smdebug's reading of the file (json.loads(f.read().lower())), then its
// TraceFileLocation: <localpath>/framework/pevents/<YYYYMMDDHH>/
// <end_us>_<pid>-<host>_pythontimeline.json, one trace event per line.
constexpr char kSmdebugStandIn[] = R"sh(
set -e
config=$(tr 'A-Z' 'a-z' < "$SMPROFILER_CONFIG_PATH")
localpath=$(printf '%s\n' "$config" | sed -n 's/.*"localpath": "\([^"]*\)".*/\1/p')
[ -n "$localpath" ] || { echo "no localpath in $SMPROFILER_CONFIG_PATH" >&2; exit 3; }
start_s=$(date -u +%s)
start_us=$((start_s * 1000000))
dir="$localpath/framework/pevents/$(date -u -d "@$start_s" +%Y%m%d%H)"
mkdir -p "$dir"
file="$dir/$((start_us + 9000))_$$-host_pythontimeline.json"
cat > "$file.tmp" <<EOF
[
{"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": $start_us}},
{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "Step:ModeKeys.TRAIN"}},
{"name": "Step:ModeKeys.TRAIN", "pid": 0, "ph": "X", "ts": 1000, "dur": 2000, "args": {"pid": $$, "step_num": "0"}},
{"name": "Step:ModeKeys.TRAIN", "pid": 0, "ph": "X", "ts": 3000, "dur": 2000, "args": {"pid": $$, "step_num": "1"}},
{"name": "Step:ModeKeys.TRAIN", "pid": 0, "ph": "X", "ts": 5000, "dur": 2000, "args": {"pid": $$, "step_num": "2"}}
]
EOF
mv "$file.tmp" "$file"
)sh";

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::vector<fs::path> Timelines(const fs::path& root) {
  std::vector<fs::path> found;
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(root, error);
       !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
    if (absl::EndsWith(it->path().filename().string(), "_pythontimeline.json")) {
      found.push_back(it->path());
    }
  }
  return found;
}

class AgentSmdebugPathsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    // Where smdebug would have written without the alias: only there when
    // the test fails, and then outside data_ when its name has capitals.
    if (lower_job_dir() == job_dir()) return;
    std::error_code ignored;
    fs::remove_all(lower_job_dir(), ignored);
    fs::remove(Lower(data_.path().string()), ignored);  // Only if empty.
  }

  fs::path job_dir() const { return data_.path() / kJob; }
  fs::path lower_job_dir() const { return Lower(job_dir().string()); }

  v1::ProfilerRuleEvaluationStatus WaitForTerminalRule() {
    v1::ProfilerRuleEvaluationStatus rule;
    const bool ended = WaitUntil(
        [&] {
          const v1::DescribeTrainingJobResponse job = DescribeJob(*server_.Stub(), kJob);
          if (job.profiler_rule_evaluation_statuses_size() != 1) return true;
          rule = job.profiler_rule_evaluation_statuses(0);
          return rule.rule_evaluation_status() != v1::RuleEvaluationStatus::InProgress;
        },
        absl::Seconds(60));
    if (!ended) ADD_FAILURE() << "the rule did not end: " << rule.ShortDebugString();
    return rule;
  }

  ScopedTempDir data_;
  LowerCaseTempDir agent_tmp_;
  ServerProcess server_{data_.path()};
};

TEST_F(AgentSmdebugPathsTest, FrameworkTimelinesOfAJobNamedInCapitalsReachTheServer) {
  const fs::path profiler_output = job_dir() / "profiler-output";
  v1::CreateTrainingJobRequest create;
  create.set_training_job_name(kJob);
  create.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  create.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
  create.mutable_profiler_config()->set_s3_output_path(profiler_output.string());
  auto* rule = create.add_profiler_rule_configurations();
  rule->set_rule_configuration_name("OverallFrameworkMetrics");
  rule->set_rule_evaluator_image(kRulesImage);
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = "OverallFrameworkMetrics";
  grpc::Status status = CreateJob(*server_.Stub(), create);
  ASSERT_TRUE(status.ok()) << status.error_message();

  const fs::path config_dir = job_dir() / "config";
  const fs::path agent_log = data_.path() / "agent.log";
  AgentProcess agent({"--server", server_.address(), "--job", kJob, "--config-dir",
                      config_dir.string(), "--allow-write", data_.path().string()},
                     {"/bin/sh", "-c", kSmdebugStandIn}, agent_log, /*working_directory=*/{},
                     {{"TMPDIR", agent_tmp_.path().string()}});
  ASSERT_EQ(agent.Wait(absl::Seconds(60)), 0) << agent.log();

  // The file smdebug reads names a path that its lower-casing leaves as is:
  // a symlink in the agent's own directory to the real output directory.
  const nlohmann::json config =
      nlohmann::json::parse(ReadFile(config_dir / "profilerconfig.json"))["ProfilingParameters"];
  const std::string local_path = config["LocalPath"];
  EXPECT_EQ(Lower(local_path), local_path);
  EXPECT_EQ(local_path.rfind(agent_tmp_.path().string(), 0), 0u) << local_path;
  EXPECT_TRUE(fs::equivalent(local_path, profiler_output)) << local_path;

  // The timeline is where the server reads, and nowhere else.
  const std::vector<fs::path> timelines = Timelines(profiler_output / "framework" / "pevents");
  EXPECT_EQ(timelines.size(), 1u) << ReadFile(agent_log);
  EXPECT_FALSE(fs::exists(lower_job_dir() / "profiler-output" / "framework"));

  // And the server's framework rule read it.
  const v1::ProfilerRuleEvaluationStatus verdict = WaitForTerminalRule();
  EXPECT_EQ(verdict.rule_evaluation_status(), v1::RuleEvaluationStatus::NoIssuesFound)
      << verdict.status_details();
  EXPECT_THAT(verdict.status_details(), Not(HasSubstr("no framework events")));
  EXPECT_THAT(verdict.status_details(), HasSubstr("TRAIN"));
}

}  // namespace
}  // namespace debugplane
