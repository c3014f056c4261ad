// Detailed profiling of a running PyTorch job, end to end: the real server,
// `debugplane-agent run` and a real training loop (Debian's python3-torch,
// CPU, /usr/bin/python3: tests/data/frameworks/torch_training_loop.py) that
// profiles with debugplane_profiler, the module the agent writes beside its
// config files and puts on PYTHONPATH. An UpdateTrainingJob sent while it
// runs turns detailed profiling on for steps 200-219 (or for a time
// window); the server's framework view (the framework rules, the profiler
// report) then has exactly those steps. A profiler that fails does not stop
// the training.

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "debugplane/v1/profiler_report.grpc.pb.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/service/agent_process.h"
#include "tests/service/server_process.h"
#include "tests/service/training_job_calls.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/support/wait_until.h"

namespace debugplane {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::AgentProcess;
using ::debugplane::testing::Context;
using ::debugplane::testing::CreateJob;
using ::debugplane::testing::DescribeJob;
using ::debugplane::testing::ReadFile;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::debugplane::testing::WaitUntil;
using ::testing::HasSubstr;

constexpr char kPython[] = "/usr/bin/python3";
const char kLoop[] = DP_TEST_DATA_DIR "/frameworks/torch_training_loop.py";
constexpr char kRulesImage[] =
    "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest";

class PyTorchProfilerAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A real part the test needs: its absence fails the test (no skip).
    ASSERT_EQ(std::system("/usr/bin/python3 -c 'import torch' 2> /dev/null"), 0)
        << "no torch for /usr/bin/python3: install Debian's python3-torch "
           "(scripts/install-deps.sh installs it)";
  }

  v1::CreateTrainingJobRequest Job(const std::string& name) {
    v1::CreateTrainingJobRequest request = testing::MinimalJob(name);
    request.mutable_profiler_config()->set_s3_output_path(
        (data_.path() / name / "profiler").string());
    request.mutable_profiler_config()->set_profiling_interval_in_milliseconds(500);
    for (const char* rule : {"OverallFrameworkMetrics", "ProfilerReport"}) {
      auto* r = request.add_profiler_rule_configurations();
      r->set_rule_configuration_name(rule);
      r->set_rule_evaluator_image(kRulesImage);
      (*r->mutable_rule_parameters())["rule_to_invoke"] = rule;
    }
    return request;
  }

  std::vector<std::string> AgentArgs(const std::string& job) {
    return {"--server",      server_.address(),
            "--job",         job,
            "--config-dir",  (data_.path() / job / "config").string(),
            "--allow-write", data_.path().string(),
            "--stop-grace",  "1",
            // SageMaker's name for the first host (the default is the
            // machine's name); the traces land under framework/pytorch/algo-1.
            "--node-id",     "algo-1"};
  }

  void Update(const std::string& job, const std::string& detailed) {
    v1::UpdateTrainingJobRequest update;
    update.set_training_job_name(job);
    (*update.mutable_profiler_config()->mutable_profiling_parameters())["DetailedProfilingConfig"] =
        detailed;
    v1::UpdateTrainingJobResponse updated;
    grpc::Status status = server_.Stub()->UpdateTrainingJob(Context().get(), update, &updated);
    ASSERT_TRUE(status.ok()) << status.error_message();
    warnings_ = std::vector<std::string>(updated.warnings().begin(), updated.warnings().end());
  }

  // The final profiler report's JSON, once the job's rules are done.
  nlohmann::json FinalReport(const std::string& job) {
    auto stub = v1::ProfilerReportService::NewStub(server_.Channel());
    nlohmann::json report;
    EXPECT_TRUE(WaitUntil(
        [&] {
          v1::GetProfilerReportRequest request;
          request.set_training_job_name(job);
          request.set_format(v1::ProfilerReportFormat::JSON);
          v1::GetProfilerReportResponse response;
          if (!stub->GetProfilerReport(Context().get(), request, &response).ok()) return false;
          report = nlohmann::json::parse(response.content());
          return report["final"] == true;
        },
        absl::Seconds(60)))
        << report.dump();
    return report;
  }

  // The ProfilerStep#N numbers in the traces under the job's profiler output.
  std::set<int64_t> TracedSteps(const std::string& job) {
    std::set<int64_t> steps;
    const fs::path dir = data_.path() / job / "profiler" / "framework" / "pytorch" / "algo-1";
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(dir, error)) {
      if (!absl::EndsWith(entry.path().string(), ".pt.trace.json")) continue;
      const nlohmann::json trace = nlohmann::json::parse(ReadFile(entry.path()));
      EXPECT_TRUE(trace.contains("baseTimeNanoseconds"));
      for (const auto& e : trace["traceEvents"]) {
        const std::string name = e.value("name", "");
        if (absl::StartsWith(name, "ProfilerStep#")) steps.insert(std::stoll(name.substr(13)));
      }
    }
    return steps;
  }

  ScopedTempDir data_;
  ServerProcess server_{data_.path()};
  std::vector<std::string> warnings_;
};

TEST_F(PyTorchProfilerAgentTest, DetailedProfilingTurnedOnMidRunTracesThoseStepsOnly) {
  ASSERT_TRUE(CreateJob(*server_.Stub(), Job("torch-steps")).ok());
  AgentProcess agent(AgentArgs("torch-steps"), {kPython, kLoop, "260", "100"},
                     data_.path() / "agent.log");
  // The loop waits at step 100 for a profiling window to be asked for.
  ASSERT_TRUE(WaitUntil([&] {
    return DescribeJob(*server_.Stub(), "torch-steps").secondary_status() ==
           v1::SecondaryStatus::Training;
  })) << agent.log();
  Update("torch-steps", "{\"StartStep\": 200, \"NumSteps\": 20}");
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_THAT(warnings_[0], HasSubstr("PyTorch 2 jobs that profile with debugplane_profiler"));
  ASSERT_EQ(agent.Wait(absl::Seconds(120)), 0) << agent.log();
  EXPECT_THAT(agent.log(), HasSubstr("trained 260 steps"));

  std::set<int64_t> expected;
  for (int64_t s = 200; s < 220; ++s) expected.insert(s);
  EXPECT_EQ(TracedSteps("torch-steps"), expected);
  const nlohmann::json report = FinalReport("torch-steps");
  EXPECT_EQ(report["steps"]["count"], 20) << report["steps"].dump();
  for (const auto& slow : report["steps"]["slowest"]) {
    EXPECT_GE(slow["step"].get<int64_t>(), 200);
    EXPECT_LT(slow["step"].get<int64_t>(), 220);
    EXPECT_EQ(slow["node"], "algo-1");
  }
  EXPECT_THAT(report["data_summary"].get<std::string>(), HasSubstr("1 PyTorch trace, "));
  for (const auto& finding : report["findings"]) {
    if (finding["rule"] == "OverallFrameworkMetrics") {
      EXPECT_THAT(finding.dump(), HasSubstr("20 steps (TRAIN 20"));
    }
  }
}

TEST_F(PyTorchProfilerAgentTest, AWindowByTimeTracesTheStepsInIt) {
  ASSERT_TRUE(CreateJob(*server_.Stub(), Job("torch-time")).ok());
  AgentProcess agent(AgentArgs("torch-time"), {kPython, kLoop, "100000", "10", "--run-after", "10"},
                     data_.path() / "agent.log");
  ASSERT_TRUE(WaitUntil([&] {
    return DescribeJob(*server_.Stub(), "torch-time").secondary_status() ==
           v1::SecondaryStatus::Training;
  })) << agent.log();
  // Seconds ahead: the update reaches the loop through the agent, which
  // took up to 5 s on a loaded 2-core host; the loop trains 10 s after it
  // arrived.
  const int64_t start = absl::ToUnixSeconds(absl::Now()) + 5;
  Update("torch-time",
         absl::StrCat("{\"StartTimeInSecSinceEpoch\": ", start, ", \"DurationInSeconds\": 2}"));
  ASSERT_EQ(agent.Wait(absl::Seconds(120)), 0) << agent.log();
  const std::set<int64_t> steps = TracedSteps("torch-time");
  ASSERT_FALSE(steps.empty()) << agent.log();
  // Consecutive steps: one window.
  EXPECT_EQ(*steps.rbegin() - *steps.begin() + 1, static_cast<int64_t>(steps.size()));
  const nlohmann::json report = FinalReport("torch-time");
  EXPECT_EQ(report["steps"]["count"], static_cast<int64_t>(steps.size()));
  // The steps lie in the window (the report's first and last step times).
  for (const auto& slow : report["steps"]["slowest"]) {
    EXPECT_TRUE(steps.count(slow["step"].get<int64_t>())) << slow.dump();
  }
}

TEST_F(PyTorchProfilerAgentTest, AProfilerErrorDoesNotStopTraining) {
  ASSERT_TRUE(CreateJob(*server_.Stub(), Job("torch-broken")).ok());
  AgentProcess agent(AgentArgs("torch-broken"), {kPython, kLoop, "60", "10", "--broken-profiler"},
                     data_.path() / "agent.log");
  ASSERT_TRUE(WaitUntil([&] {
    return DescribeJob(*server_.Stub(), "torch-broken").secondary_status() ==
           v1::SecondaryStatus::Training;
  })) << agent.log();
  Update("torch-broken", "{\"StartStep\": 20, \"NumSteps\": 5}");
  ASSERT_EQ(agent.Wait(absl::Seconds(120)), 0) << agent.log();
  EXPECT_THAT(agent.log(), HasSubstr("debugplane_profiler: profiling is off for this process: "
                                     "RuntimeError: torch.profiler broken on purpose"));
  EXPECT_THAT(agent.log(), HasSubstr("trained 60 steps"));
  EXPECT_TRUE(TracedSteps("torch-broken").empty());
  EXPECT_EQ(DescribeJob(*server_.Stub(), "torch-broken").training_job_status(),
            v1::TrainingJobStatus::Completed);
}

}  // namespace
}  // namespace debugplane
