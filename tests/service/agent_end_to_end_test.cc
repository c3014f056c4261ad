// The host agent end to end: the real server, `debugplane-agent run` around a
// stand-in training script that reads profilerconfig.json at every step and
// writes smdebug steps, updates while it runs, stop orders, failures and a
// server restart.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/jobs/job_record.h"
#include "debugplane/v1/profiler_report.grpc.pb.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/core/test_util.h"
#include "tests/service/agent_process.h"
#include "tests/service/server_process.h"
#include "tests/service/training_job_calls.h"
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

class AgentEndToEndTest : public ::testing::Test {
 protected:
  v1::CreateTrainingJobRequest Job(const std::string& name, const std::string& action_json = "") {
    v1::CreateTrainingJobRequest request;
    request.set_training_job_name(name);
    request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
    request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
    request.mutable_debug_hook_config()->set_s3_output_path(
        (data_.path() / name / "tensors").string());
    auto* collection = request.mutable_debug_hook_config()->add_collection_configurations();
    collection->set_collection_name("losses");
    request.mutable_profiler_config()->set_s3_output_path(
        (data_.path() / name / "profiler").string());
    request.mutable_profiler_config()->set_profiling_interval_in_milliseconds(500);
    auto* rule = request.add_debug_rule_configurations();
    rule->set_rule_configuration_name("ExplodingTensor");
    rule->set_rule_evaluator_image("builtin");
    (*rule->mutable_rule_parameters())["rule_to_invoke"] = "ExplodingTensor";
    if (!action_json.empty()) (*rule->mutable_rule_parameters())["action_json"] = action_json;
    return request;
  }

  void Create(const v1::CreateTrainingJobRequest& request) {
    grpc::Status status = CreateJob(*server_.Stub(), request);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  v1::DescribeTrainingJobResponse Describe(const std::string& name) {
    return DescribeJob(*server_.Stub(), name);
  }

  // System-metric lines for cpu0's utilization written so far.
  int CpuSamples(const std::string& job) {
    int count = 0;
    std::error_code error;
    const fs::path root = data_.path() / job / "profiler" / "system";
    for (auto it = fs::recursive_directory_iterator(root, error);
         !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
      if (!it->is_regular_file()) continue;
      std::ifstream in(it->path());
      std::string line;
      while (std::getline(in, line)) {
        count +=
            absl::StrContains(line, "\"cpu0\"") && absl::StrContains(line, "\"CPUUtilization\"");
      }
    }
    return count;
  }

  // The job's output is under data_ (Job()), which the agent may write.
  std::vector<std::string> AgentArgs(const std::string& job) {
    return {"--server",      server_.address(),
            "--job",         job,
            "--config-dir",  (data_.path() / job / "config").string(),
            "--allow-write", data_.path().string(),
            "--stop-grace",  "1"};
  }

  ScopedTempDir data_;
  ServerProcess server_{data_.path()};
};

TEST_F(AgentEndToEndTest, ConfiguresTheScriptAndAppliesAnUpdateWhileItRuns) {
  Create(Job("configured"));
  const fs::path training_log = data_.path() / "training.log";
  AgentProcess agent(AgentArgs("configured"),
                     {DP_FAKE_TRAINING_BINARY, "--steps", "350", "--step-ms", "20", "--log",
                      training_log.string()},
                     data_.path() / "agent.log");
  ASSERT_TRUE(WaitUntil([&] {
    return Describe("configured").secondary_status() == v1::SecondaryStatus::Training;
  })) << agent.log();
  // The script was configured by the service before it started: its first
  // step (logged a moment after the start is reported) sees the job's values.
  ASSERT_TRUE(WaitUntil([&] { return !ReadFile(training_log).empty(); }, absl::Seconds(10)));
  // LocalPath leads to the job's profiler directory (through a lower-case
  // symlink when its path has capitals: smdebug lower-cases the file).
  std::string first_step = ReadFile(training_log);
  ASSERT_EQ(first_step.rfind("step 0 {", 0), 0u) << first_step;
  first_step = first_step.substr(7, first_step.find('\n') - 7);
  const nlohmann::json seen = nlohmann::json::parse(first_step, nullptr, false);
  ASSERT_TRUE(seen.contains("LocalPath")) << first_step;
  EXPECT_TRUE(fs::equivalent(seen["LocalPath"].get<std::string>(),
                             data_.path() / "configured" / "profiler"))
      << first_step;
  EXPECT_THAT(ReadFile(training_log), HasSubstr("\"ProfilingIntervalInMilliseconds\":500"));

  // The sampler's rate at 500 ms.
  absl::SleepFor(absl::Milliseconds(300));
  int before = CpuSamples("configured");
  absl::SleepFor(absl::Seconds(2));
  const int at_500ms = CpuSamples("configured") - before;

  v1::UpdateTrainingJobRequest update;
  update.set_training_job_name("configured");
  update.mutable_profiler_config()->set_profiling_interval_in_milliseconds(100);
  (*update.mutable_profiler_config()->mutable_profiling_parameters())["DetailedProfilingConfig"] =
      "{\"StartStep\": 200, \"NumSteps\": 3}";
  v1::UpdateTrainingJobResponse updated;
  grpc::Status status = server_.Stub()->UpdateTrainingJob(Context().get(), update, &updated);
  ASSERT_TRUE(status.ok()) << status.error_message();

  // The script sees the new values at its next steps.
  EXPECT_TRUE(WaitUntil(
      [&] {
        const std::string seen = ReadFile(training_log);
        return absl::StrContains(seen, "\"ProfilingIntervalInMilliseconds\":100") &&
               absl::StrContains(seen, "StartStep\\\": 200");
      },
      absl::Seconds(5)))
      << ReadFile(training_log);
  // And the sampler runs five times as often.
  absl::SleepFor(absl::Milliseconds(300));
  before = CpuSamples("configured");
  absl::SleepFor(absl::Seconds(2));
  const int at_100ms = CpuSamples("configured") - before;
  EXPECT_GE(at_500ms, 2);
  EXPECT_LE(at_500ms, 6);
  EXPECT_GE(at_100ms, 2 * at_500ms + 4) << "500 ms: " << at_500ms << ", 100 ms: " << at_100ms;

  EXPECT_EQ(agent.Wait(absl::Seconds(60)), 0) << agent.log();
  v1::DescribeTrainingJobResponse job = Describe("configured");
  EXPECT_EQ(job.training_job_status(), v1::TrainingJobStatus::Completed);
  EXPECT_TRUE(job.progress_info().has_current_step()) << job.DebugString();
  EXPECT_GT(job.progress_info().current_step(), 0);
  EXPECT_EQ(job.config_version(), 2);
  // The rule read what the script wrote, to the end.
  ASSERT_TRUE(WaitUntil([&] {
    return Describe("configured").debug_rule_evaluation_statuses(0).rule_evaluation_status() ==
           v1::RuleEvaluationStatus::NoIssuesFound;
  })) << Describe("configured").DebugString();
}

TEST_F(AgentEndToEndTest, AFailingCommandFailsTheJobWithItsExitCode) {
  Create(Job("failing"));
  AgentProcess agent(AgentArgs("failing"),
                     {DP_FAKE_TRAINING_BINARY, "--steps", "3", "--exit-code", "3"},
                     data_.path() / "agent.log");
  EXPECT_EQ(agent.Wait(absl::Seconds(30)), 3) << agent.log();
  v1::DescribeTrainingJobResponse job = Describe("failing");
  EXPECT_EQ(job.training_job_status(), v1::TrainingJobStatus::Failed);
  EXPECT_EQ(job.failure_reason(), "the training command exited with code 3");
}

TEST_F(AgentEndToEndTest, ARuleActionStopsTheTrainingProcess) {
  // The full loop: the script writes a NaN, the rule finds it, its
  // StopTraining action stops the job, the agent kills the script (which
  // ignores SIGTERM, so SIGKILL after the grace period).
  Create(Job("guarded", R"({"name": "stoptraining"})"));
  AgentProcess agent(AgentArgs("guarded"),
                     {DP_FAKE_TRAINING_BINARY, "--steps", "100000", "--step-ms", "20", "--nan-at",
                      "10", "--ignore-term"},
                     data_.path() / "agent.log");
  EXPECT_EQ(agent.Wait(absl::Seconds(60)), 128 + SIGKILL) << agent.log();
  v1::DescribeTrainingJobResponse job = Describe("guarded");
  EXPECT_EQ(job.training_job_status(), v1::TrainingJobStatus::Stopped);
  EXPECT_EQ(job.debug_rule_evaluation_statuses(0).rule_evaluation_status(),
            v1::RuleEvaluationStatus::IssuesFound);
  EXPECT_THAT(agent.log(), HasSubstr("Stopped by rule ExplodingTensor"));
  EXPECT_THAT(agent.log(), HasSubstr("killing it"));
}

TEST_F(AgentEndToEndTest, TheProfilerReportDrawsTheHostsMetricsAndIsFinalWhenTrainingEnds) {
  // The agent samples this host's real metrics; ProfilerReport evaluates
  // them as they land and serves the final report once the command exits.
  v1::CreateTrainingJobRequest request = Job("profiled");
  request.mutable_profiler_config()->set_profiling_interval_in_milliseconds(100);
  auto* rule = request.add_profiler_rule_configurations();
  rule->set_rule_configuration_name("ProfilerReport");
  rule->set_rule_evaluator_image("builtin");
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = "ProfilerReport";
  Create(request);
  AgentProcess agent(AgentArgs("profiled"),
                     {DP_FAKE_TRAINING_BINARY, "--steps", "40", "--step-ms", "25"},
                     data_.path() / "agent.log");
  EXPECT_EQ(agent.Wait(absl::Seconds(60)), 0) << agent.log();

  auto reports = v1::ProfilerReportService::NewStub(server_.Channel());
  v1::GetProfilerReportRequest get;
  get.set_training_job_name("profiled");
  get.set_format(v1::ProfilerReportFormat::JSON);
  v1::GetProfilerReportResponse report;
  nlohmann::json summary;
  EXPECT_TRUE(WaitUntil([&] {
    grpc::Status status = reports->GetProfilerReport(Context().get(), get, &report);
    if (!status.ok()) return false;
    summary = nlohmann::json::parse(report.content(), nullptr, false);
    return !summary.is_discarded() && summary["final"] == true;
  })) << report.content();
  // Final once the script closed its trial (training_job_end.ts) or the
  // agent reported the exit, whichever the server saw first.
  EXPECT_THAT(summary["training_job_status"].get<std::string>(),
              ::testing::AnyOf(HasSubstr("training data complete"), "Completed"));
  EXPECT_GT(summary["system"]["metric_points"].get<int64_t>(), 0) << summary["system"].dump();
  bool cpu_seen = false;
  for (const auto& device : summary["system"]["devices"]) {
    cpu_seen = cpu_seen || device["dimension"] == "CPUUtilization";
  }
  EXPECT_TRUE(cpu_seen) << summary["system"].dump();
  // Every rule of the report concluded; the job's rule status too.
  v1::DescribeTrainingJobResponse job = Describe("profiled");
  EXPECT_TRUE(core::IsTerminal(job.profiler_rule_evaluation_statuses(0).rule_evaluation_status()))
      << job.profiler_rule_evaluation_statuses(0).status_details();
}

TEST_F(AgentEndToEndTest, TheAgentReconnectsAfterAServerRestartWithoutLosingTheCommand) {
  Create(Job("restarted"));
  const fs::path training_log = data_.path() / "training.log";
  AgentProcess agent(AgentArgs("restarted"),
                     {DP_FAKE_TRAINING_BINARY, "--steps", "400", "--step-ms", "20", "--log",
                      training_log.string()},
                     data_.path() / "agent.log");
  ASSERT_TRUE(WaitUntil([&] {
    return Describe("restarted").secondary_status() == v1::SecondaryStatus::Training;
  })) << agent.log();
  server_.RestartOnSamePort();  // kill -9, start again on the same database and port.
  v1::UpdateTrainingJobRequest update;
  update.set_training_job_name("restarted");
  update.mutable_profiler_config()->set_profiling_interval_in_milliseconds(200);
  v1::UpdateTrainingJobResponse updated;
  grpc::Status status = server_.Stub()->UpdateTrainingJob(Context().get(), update, &updated);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(WaitUntil(
      [&] {
        return absl::StrContains(ReadFile(training_log), "\"ProfilingIntervalInMilliseconds\":200");
      },
      absl::Seconds(10)))
      << agent.log();
  EXPECT_EQ(agent.Wait(absl::Seconds(60)), 0) << agent.log();
  EXPECT_EQ(Describe("restarted").training_job_status(), v1::TrainingJobStatus::Completed);
  EXPECT_THAT(agent.log(), HasSubstr("reconnected"));
}

// The pid a shell command wrote to `file` (0 if none yet).
pid_t PidIn(const fs::path& file) {
  std::ifstream in(file);
  pid_t pid = 0;
  in >> pid;
  return pid;
}

bool ProcessGone(pid_t pid) { return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH; }

std::string StoppedMessage(const v1::DescribeTrainingJobResponse& job) {
  return job.secondary_status_transitions().empty()
             ? ""
             : job.secondary_status_transitions().rbegin()->status_message();
}

TEST_F(AgentEndToEndTest, AStoppedJobIsStoppingUntilTheCommandHasExited) {
  // A command that takes a second to exit after SIGTERM (saving a
  // checkpoint, say): the job is Stopped only once it is gone.
  Create(Job("graceful"));
  const fs::path pid_file = data_.path() / "graceful.pid";
  const fs::path saved = data_.path() / "graceful.saved";
  const std::string script =
      absl::StrCat("echo $$ > ", pid_file.string(), "; trap 'sleep 1; echo saved > ",
                   saved.string(), "; exit 0' TERM; while :; do sleep 0.05; done");
  std::vector<std::string> args = AgentArgs("graceful");
  args.back() = "30";  // --stop-grace: the command exits on its own.
  AgentProcess agent(args, {"/bin/sh", "-c", script}, data_.path() / "agent.log");
  ASSERT_TRUE(WaitUntil([&] {
    return Describe("graceful").secondary_status() == v1::SecondaryStatus::Training &&
           PidIn(pid_file) > 0;
  })) << agent.log();
  const pid_t command = PidIn(pid_file);

  v1::StopTrainingJobRequest stop;
  stop.set_training_job_name("graceful");
  v1::StopTrainingJobResponse stopped;
  const absl::Time ordered = absl::Now();
  ASSERT_TRUE(server_.Stub()->StopTrainingJob(Context().get(), stop, &stopped).ok());
  v1::DescribeTrainingJobResponse job;
  ASSERT_TRUE(WaitUntil([&] {
    job = Describe("graceful");
    if (job.training_job_status() == v1::TrainingJobStatus::Stopping) {
      // While Stopping the command may still run; once Stopped it must not.
      return false;
    }
    return true;
  })) << agent.log();
  const absl::Duration stopping_for = absl::Now() - ordered;
  EXPECT_EQ(job.training_job_status(), v1::TrainingJobStatus::Stopped) << job.DebugString();
  EXPECT_TRUE(fs::exists(saved)) << "Stopped before the command finished its SIGTERM handler";
  EXPECT_TRUE(ProcessGone(command)) << "Stopped while the command still runs";
  EXPECT_GE(stopping_for, absl::Milliseconds(900));
  EXPECT_EQ(job.secondary_status(), v1::SecondaryStatus::Stopped);
  EXPECT_THAT(StoppedMessage(job),
              HasSubstr("the training command exited with code 0 after SIGTERM (signal 15), "));
  EXPECT_THAT(StoppedMessage(job), HasSubstr(" s after the stop order"));
  EXPECT_EQ(agent.Wait(absl::Seconds(10)), 0) << agent.log();
}

TEST_F(AgentEndToEndTest, MaxRuntimeInSecondsStopsAHungCommand) {
  v1::CreateTrainingJobRequest request = Job("limited");
  request.mutable_stopping_condition()->set_max_runtime_in_seconds(2);
  Create(request);
  const fs::path pid_file = data_.path() / "limited.pid";
  const absl::Time started = absl::Now();
  AgentProcess agent(
      AgentArgs("limited"),
      {"/bin/sh", "-c", absl::StrCat("echo $$ > ", pid_file.string(), "; exec sleep 60")},
      data_.path() / "agent.log");
  // sleep ends on SIGTERM: the agent's exit code says so.
  EXPECT_EQ(agent.Wait(absl::Seconds(20)), 128 + SIGTERM) << agent.log();
  EXPECT_GE(absl::Now() - started, absl::Seconds(2));
  EXPECT_TRUE(ProcessGone(PidIn(pid_file)));
  v1::DescribeTrainingJobResponse job = Describe("limited");
  EXPECT_EQ(job.training_job_status(), v1::TrainingJobStatus::Stopped) << job.DebugString();
  EXPECT_EQ(job.secondary_status(), v1::SecondaryStatus::MaxRuntimeExceeded);
  EXPECT_EQ(job.failure_reason(), "Training job exceeded MaxRuntimeInSeconds of 2 s");
  EXPECT_THAT(StoppedMessage(job), HasSubstr("signal 15"));
  EXPECT_FALSE(job.has_model_artifacts());
  EXPECT_THAT(agent.log(), HasSubstr("Training job exceeded MaxRuntimeInSeconds of 2 s"));
}

TEST_F(AgentEndToEndTest, AJobWhoseAgentDiedIsStoppedAfterTheReconnectWaitSayingSo) {
  ScopedTempDir data;
  // Job() puts the output under the fixture's directory.
  ServerProcess server(data.path(),
                       {"--stop-wait-without-agent", "1", "--data-root", data_.path().string()});
  auto stub = server.Stub();
  v1::CreateTrainingJobRequest request = Job("orphaned");
  ASSERT_TRUE(CreateJob(*stub, request).ok());
  auto describe = [&] { return DescribeJob(*stub, "orphaned"); };
  const fs::path pid_file = data.path() / "orphaned.pid";
  // The command ignores SIGTERM, and the agent would wait a minute before
  // SIGKILL; it is killed -9 itself before that.
  AgentProcess agent({"--server", server.address(), "--job", "orphaned", "--config-dir",
                      (data.path() / "config").string(), "--allow-write", data_.path().string(),
                      "--stop-grace", "60"},
                     {"/bin/sh", "-c",
                      absl::StrCat("echo $$ > ", pid_file.string(),
                                   "; trap '' TERM; while :; do sleep 0.05; done")},
                     data.path() / "agent.log");
  ASSERT_TRUE(WaitUntil([&] {
    return describe().secondary_status() == v1::SecondaryStatus::Training && PidIn(pid_file) > 0;
  })) << agent.log();
  const pid_t command = PidIn(pid_file);
  v1::StopTrainingJobRequest stop;
  stop.set_training_job_name("orphaned");
  v1::StopTrainingJobResponse stopped;
  ASSERT_TRUE(stub->StopTrainingJob(Context().get(), stop, &stopped).ok());
  ASSERT_TRUE(WaitUntil([&] { return absl::StrContains(agent.log(), "stopping the training"); }))
      << agent.log();
  // The agent is connected: the job waits for it (the confirm bound is
  // minutes).
  absl::SleepFor(absl::Milliseconds(1500));
  EXPECT_EQ(describe().training_job_status(), v1::TrainingJobStatus::Stopping);
  agent.Kill();
  v1::DescribeTrainingJobResponse job;
  EXPECT_TRUE(WaitUntil(
      [&] {
        job = describe();
        return job.training_job_status() == v1::TrainingJobStatus::Stopped;
      },
      absl::Seconds(10)))
      << job.DebugString();
  EXPECT_THAT(StoppedMessage(job),
              HasSubstr("no agent was connected to stop the training process"));
  kill(-command, SIGKILL);  // The orphan, its process group.
}

// Every file under `dir` (none if it does not exist).
std::vector<std::string> FilesUnder(const fs::path& dir) {
  std::vector<std::string> files;
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(dir, error);
       !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
    files.push_back(it->path().string());
  }
  return files;
}

TEST_F(AgentEndToEndTest, ALocalPathOutsideTheAllowedDirectoriesIsRefusedBeforeTheCommandStarts) {
  // LocalPath is only checked to be absolute by the server: it is the
  // training host's path. The agent is allowed data_ (and runs there), not
  // `outside`.
  ScopedTempDir outside;
  v1::CreateTrainingJobRequest request = Job("escaping");
  const fs::path local_path = outside.path() / "escaping" / "tensors";
  request.mutable_debug_hook_config()->set_s3_output_path("s3://bucket/tensors");
  request.mutable_debug_hook_config()->set_local_path(local_path.string());
  Create(request);
  const fs::path work = data_.path() / "work";
  fs::create_directories(work);
  const fs::path ran = data_.path() / "ran";
  const std::vector<std::string> command = {"/bin/sh", "-c", "touch " + ran.string()};
  {
    AgentProcess agent(AgentArgs("escaping"), command, data_.path() / "agent.log", work);
    EXPECT_EQ(agent.Wait(absl::Seconds(30)), 2) << agent.log();
    EXPECT_THAT(agent.log(),
                HasSubstr("DebugHookConfig.LocalPath " + local_path.string() +
                          " is outside the directories this agent may write (the working "
                          "directory " +
                          work.string()));
    EXPECT_THAT(agent.log(), HasSubstr("allow it with --allow-write " + local_path.string() +
                                       ", or give --tensor-dir DIR; not starting the command"));
  }
  EXPECT_FALSE(fs::exists(ran)) << "the command ran";
  EXPECT_THAT(FilesUnder(outside.path()), ::testing::IsEmpty());
  EXPECT_NE(Describe("escaping").secondary_status(), v1::SecondaryStatus::Training);

  // Allowed, the same job runs, with its tensors where LocalPath says.
  std::vector<std::string> args = AgentArgs("escaping");
  args.insert(args.end(), {"--allow-write", outside.path().string()});
  AgentProcess agent(args, command, data_.path() / "agent2.log", work);
  EXPECT_EQ(agent.Wait(absl::Seconds(30)), 0) << agent.log();
  EXPECT_TRUE(fs::exists(ran));
  EXPECT_TRUE(fs::is_directory(local_path));
  EXPECT_EQ(Describe("escaping").training_job_status(), v1::TrainingJobStatus::Completed);
}

TEST_F(AgentEndToEndTest, ADirectorySwappedForASymlinkAfterCreateDoesNotLeadTheAgentOut) {
  // The server checked S3OutputPath at Create (inside its data root); then
  // the job's directory became a symbolic link out of every allowed place.
  ScopedTempDir outside;
  Create(Job("swapped"));
  fs::create_directory_symlink(outside.path(), data_.path() / "swapped");
  const fs::path ran = data_.path() / "ran";
  AgentProcess agent(
      {"--server", server_.address(), "--job", "swapped", "--config-dir",
       (data_.path() / "swapped-config").string(), "--allow-write", data_.path().string()},
      {"/bin/sh", "-c", "touch " + ran.string()}, data_.path() / "agent.log", data_.path());
  EXPECT_EQ(agent.Wait(absl::Seconds(30)), 2) << agent.log();
  const fs::path tensors = data_.path() / "swapped" / "tensors";
  EXPECT_THAT(agent.log(),
              HasSubstr("DebugHookConfig.S3OutputPath " + tensors.string() +
                        " leads through a symbolic link to " +
                        (outside.path() / "tensors").string() + ", outside the directories"));
  EXPECT_FALSE(fs::exists(ran)) << "the command ran";
  EXPECT_THAT(FilesUnder(outside.path()), ::testing::IsEmpty());
}

}  // namespace
}  // namespace debugplane
