// What smdebug does with the profilerconfig.json the agent writes, end to
// end: the real server and `debugplane-agent run` around a stand-in for
// smdebug that lower-cases the whole file, as smdebug's
// profiler_config_parser.py does, and writes a framework timeline under the
// LocalPath it read. For a job named in capitals the timeline must still land
// in ProfilerConfig.S3OutputPath, where the server's framework rules read it.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/core/scoped_temp_dir.h"
#include "tests/service/server_process.h"

namespace debugplane {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::Context;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
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

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// A fresh directory whose path has no capitals (the agent's TMPDIR: its
// aliases must live under a lower-case path), removed afterwards.
class LowerCaseTempDir {
 public:
  LowerCaseTempDir() {
    std::string base = ::testing::TempDir();
    if (Lower(base) != base) base = "/tmp";
    static std::atomic<int> count{0};
    path_ = fs::path(base) / absl::StrCat("dp-agent-tmp-", getpid(), "-", count++);
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~LowerCaseTempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Runs `debugplane-agent run ARGS -- COMMAND` with TMPDIR=`tmp` and waits
// for it; returns its exit code (-1 on timeout, after killing it). Its
// stderr goes to `log`.
int RunAgent(const std::vector<std::string>& agent_args, const std::vector<std::string>& command,
             const fs::path& tmp, const fs::path& log, absl::Duration timeout) {
  std::vector<std::string> args = {DP_AGENT_BINARY, "run"};
  args.insert(args.end(), agent_args.begin(), agent_args.end());
  args.push_back("--");
  args.insert(args.end(), command.begin(), command.end());
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDERR_FILENO);
    setenv("TMPDIR", tmp.c_str(), 1);
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
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
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    v1::ProfilerRuleEvaluationStatus rule;
    while (absl::Now() < deadline) {
      v1::DescribeTrainingJobRequest request;
      request.set_training_job_name(kJob);
      v1::DescribeTrainingJobResponse job;
      grpc::Status status = server_.Stub()->DescribeTrainingJob(Context().get(), request, &job);
      EXPECT_TRUE(status.ok()) << status.error_message();
      if (!status.ok() || job.profiler_rule_evaluation_statuses_size() != 1) return rule;
      rule = job.profiler_rule_evaluation_statuses(0);
      if (rule.rule_evaluation_status() != v1::RuleEvaluationStatus::InProgress) return rule;
      absl::SleepFor(absl::Milliseconds(50));
    }
    ADD_FAILURE() << "the rule did not end: " << rule.ShortDebugString();
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
  v1::CreateTrainingJobResponse created;
  grpc::Status status = server_.Stub()->CreateTrainingJob(Context().get(), create, &created);
  ASSERT_TRUE(status.ok()) << status.error_message();

  const fs::path config_dir = job_dir() / "config";
  const fs::path agent_log = data_.path() / "agent.log";
  const int exit_code =
      RunAgent({"--server", server_.address(), "--job", kJob, "--config-dir", config_dir.string(),
                "--allow-write", data_.path().string()},
               {"/bin/sh", "-c", kSmdebugStandIn}, agent_tmp_.path(), agent_log, absl::Seconds(60));
  ASSERT_EQ(exit_code, 0) << ReadAll(agent_log);

  // The file smdebug reads names a path that its lower-casing leaves as is:
  // a symlink in the agent's own directory to the real output directory.
  const nlohmann::json config =
      nlohmann::json::parse(ReadAll(config_dir / "profilerconfig.json"))["ProfilingParameters"];
  const std::string local_path = config["LocalPath"];
  EXPECT_EQ(Lower(local_path), local_path);
  EXPECT_EQ(local_path.rfind(agent_tmp_.path().string(), 0), 0u) << local_path;
  EXPECT_TRUE(fs::equivalent(local_path, profiler_output)) << local_path;

  // The timeline is where the server reads, and nowhere else.
  const std::vector<fs::path> timelines = Timelines(profiler_output / "framework" / "pevents");
  EXPECT_EQ(timelines.size(), 1u) << ReadAll(agent_log);
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
