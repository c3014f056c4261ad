// Profiler rules scheduled for jobs (no network): the scheduler reads the
// job's profiler output as it lands, records verdicts, keeps a
// ProfilerReport's report current until training ends (also across a
// restart), and says why when there is nothing to read.

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "core/handlers/profiler_report_files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "rules_engine/scheduling/evaluation_scheduler.h"
#include "tests/rules_engine/scheduling/scheduler_test_fixture.h"
#include "tests/rules_engine/trial_writer.h"

namespace debugplane::rules_engine {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::CallSync;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::WaitedFor;
using ::debugplane::testing::WaitUntil;
using ::testing::HasSubstr;
using H = core::TrainingJobHandler;

class ProfilerSchedulingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    core::TrainingJobManagerOptions options;
    options.validation.allowed_custom_evaluators = {"my-profiler:latest"};
    auto manager = ::debugplane::testing::OpenTestManager(dir_.path(), options);
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *std::move(manager);
    StartScheduler();
  }
  void TearDown() override {
    scheduler_.reset();
    manager_.reset();
  }

  void StartScheduler() {
    EvaluationSchedulerOptions options;
    options.data_roots.push_back(dir_.path());
    options.report_dir = dir_.path() / "reports";
    options.report_interval = absl::Milliseconds(50);
    options.poll_interval = absl::Milliseconds(200);
    options.on_data_read = [this](const std::string& job, int64_t /*last_step*/) {
      absl::MutexLock lock(&data_reads_mu_);
      ++data_reads_[job];
    };
    scheduler_ = std::make_unique<EvaluationScheduler>(manager_.get(), options);
    scheduler_->Start();
  }

  // A job profiling to <dir>/<name>/profiler with one profiler rule.
  void CreateJob(const std::string& name, const std::string& rule_to_invoke,
                 const std::map<std::string, std::string>& parameters = {},
                 const std::string& profiler_path = "", const std::string& image = "builtin") {
    v1::CreateTrainingJobRequest request = testing::NewJobRequest(name);
    request.mutable_profiler_config()->set_s3_output_path(
        profiler_path.empty() ? ProfilerDir(name).string() : profiler_path);
    auto* rule = request.add_profiler_rule_configurations();
    rule->set_rule_configuration_name(rule_to_invoke);
    rule->set_rule_evaluator_image(image);
    (*rule->mutable_rule_parameters())["rule_to_invoke"] = rule_to_invoke;
    for (const auto& [key, value] : parameters) (*rule->mutable_rule_parameters())[key] = value;
    testing::CreateJobOrFail(*manager_, request);
  }

  // A job with a ProfilerReport and a debugging rule (ExplodingTensor) on
  // the tensor trial TrialDir(name): rules conclude when training ends.
  void CreateJobWithTrial(const std::string& name) {
    v1::CreateTrainingJobRequest request = testing::NewJobRequest(name);
    request.mutable_debug_hook_config()->set_s3_output_path(TrialDir(name).string());
    testing::AddBuiltinDebugRule(request, {"ExplodingTensor", "ExplodingTensor", {}});
    request.mutable_profiler_config()->set_s3_output_path(ProfilerDir(name).string());
    auto* rule = request.add_profiler_rule_configurations();
    rule->set_rule_configuration_name("ProfilerReport");
    rule->set_rule_evaluator_image("builtin");
    (*rule->mutable_rule_parameters())["rule_to_invoke"] = "ProfilerReport";
    testing::CreateJobOrFail(*manager_, request);
  }

  fs::path ProfilerDir(const std::string& job) const { return dir_.path() / job / "profiler"; }
  fs::path TrialDir(const std::string& job) const { return dir_.path() / job / "tensors"; }

  // Appends `samples` timestamps of 4 CPU cores at `cpu` and one GPU at
  // `gpu`, measured on `node` (each node writes its own file).
  void WriteSamples(const std::string& job, int samples, double cpu, double gpu,
                    const std::string& node = "algo-1") {
    const fs::path hour = ProfilerDir(job) / "system" / "incremental" / "2026112207";
    fs::create_directories(hour);
    std::ofstream out(hour / absl::StrCat("1795331436.", node, ".json"), std::ios::app);
    for (int i = 0; i < samples; ++i, timestamp_ += 0.5) {
      for (int core = 0; core < 4; ++core) {
        out << absl::StrFormat(
            "{\"Type\": \"cpu\", \"Name\": \"cpu%d\", \"Dimension\": "
            "\"CPUUtilization\", "
            "\"Value\": %.1f, \"NodeId\": \"%s\", \"Timestamp\": %.3f}\n",
            core, cpu, node, timestamp_);
      }
      out << absl::StrFormat(
          "{\"Type\": \"gpu\", \"Name\": \"gpu0\", \"Dimension\": "
          "\"GPUUtilization\", "
          "\"Value\": %.1f, \"NodeId\": \"%s\", \"Timestamp\": %.3f}\n",
          gpu, node, timestamp_);
    }
  }

  void EndTraining(const std::string& job) {
    ReportTraining(job, v1::ReportTrainingStatusRequest::EVENT_COMPLETED);
  }

  // What an agent reports about the training command.
  void ReportTraining(const std::string& job, v1::ReportTrainingStatusRequest::Event event) {
    testing::ReportTraining(*manager_, job, event);
  }

  // The report's HTML page once it holds `text` (written after the JSON
  // summary), or as it is after the wait.
  std::string WaitForReportHtml(const std::string& job, const std::string& rule,
                                const std::string& text) {
    const fs::path path = core::ProfilerReportFilesFor(dir_.path() / "reports", job, rule).html;
    std::string html;
    WaitUntil([&] {
      std::ifstream in(path);
      std::stringstream content;
      content << in.rdbuf();
      html = content.str();
      return html.find(text) != std::string::npos;
    });
    return html;
  }

  v1::TrainingJobStatus::Value WaitForJobStatus(const std::string& job,
                                                v1::TrainingJobStatus::Value want) {
    WaitUntil([&] { return manager_->GetJob(job)->training_job_status() == want; });
    return manager_->GetJob(job)->training_job_status();
  }

  v1::ProfilerRuleEvaluationStatus Status(const std::string& job) {
    const std::shared_ptr<const core::JobRecord> record = manager_->GetJob(job);
    return record->profiler_rule_evaluation_statuses(0);
  }

  v1::ProfilerRuleEvaluationStatus WaitForStatus(const std::string& job,
                                                 v1::RuleEvaluationStatus::Value want) {
    v1::ProfilerRuleEvaluationStatus status;
    if (WaitUntil([&] {
          status = Status(job);
          return status.rule_evaluation_status() == want;
        })) {
      return status;
    }
    ADD_FAILURE() << "rule of " << job << " never became "
                  << v1::RuleEvaluationStatus::Value_Name(want) << ": "
                  << Status(job).status_details();
    return Status(job);
  }

  // The report's JSON summary once `ready(summary)` holds (or fails).
  template <typename Ready>
  nlohmann::json WaitForReport(const std::string& job, const std::string& rule, Ready ready) {
    const fs::path path = core::ProfilerReportFilesFor(dir_.path() / "reports", job, rule).json;
    nlohmann::json summary;
    if (WaitUntil([&] {
          std::ifstream in(path);
          if (!in) return false;
          summary = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
          return !summary.is_discarded() && ready(summary);
        })) {
      return summary;
    }
    ADD_FAILURE() << "report " << path << " never got ready; last: " << summary.dump();
    return summary;
  }

  // How many turns of `job` have read new data so far.
  int DataReads(const std::string& job) {
    absl::MutexLock lock(&data_reads_mu_);
    return data_reads_[job];
  }

  static int64_t Points(const nlohmann::json& summary) {
    return summary["system"]["metric_points"].get<int64_t>();
  }

  ScopedTempDir dir_;
  // Near now: MaxInitializationTime (in ProfilerReport) compares the data
  // with the wall clock.
  double timestamp_ = static_cast<double>(absl::ToUnixMicros(absl::Now())) / 1e6;
  absl::Mutex data_reads_mu_;
  std::map<std::string, int> data_reads_ ABSL_GUARDED_BY(data_reads_mu_);
  std::unique_ptr<core::TrainingJobManager> manager_;
  std::unique_ptr<EvaluationScheduler> scheduler_;
};

TEST_F(ProfilerSchedulingTest, TheReportFollowsTheDataUntilTrainingEnds) {
  CreateJob("live", "ProfilerReport", {{"CPUBottleneck_patience", "0"}});
  // A report exists before any data: the empty state, live.
  nlohmann::json summary = WaitForReport(
      "live", "ProfilerReport", [](const nlohmann::json& s) { return s["final"] == false; });
  EXPECT_EQ(Points(summary), 0);

  WriteSamples("live", 150, 35, 90);
  summary = WaitForReport("live", "ProfilerReport",
                          [](const nlohmann::json& s) { return Points(s) == 150 * 5; });
  EXPECT_EQ(Status("live").rule_evaluation_status(), v1::RuleEvaluationStatus::InProgress);

  // A CPU bottleneck: ProfilerReport says so at once, naming the rule.
  WriteSamples("live", 400, 97, 3);
  v1::ProfilerRuleEvaluationStatus status =
      WaitForStatus("live", v1::RuleEvaluationStatus::IssuesFound);
  EXPECT_THAT(status.status_details(), HasSubstr("CPUBottleneck: CPU bottleneck on algo-1"));
  EXPECT_THAT(status.status_details(), HasSubstr("profiler-report.html"));

  // The report keeps following the data, and is final once training ends.
  WriteSamples("live", 10, 35, 90);
  WaitForReport("live", "ProfilerReport",
                [](const nlohmann::json& s) { return Points(s) == 560 * 5; });
  EndTraining("live");
  summary = WaitForReport("live", "ProfilerReport",
                          [](const nlohmann::json& s) { return s["final"] == true; });
  EXPECT_EQ(summary["training_job_status"], "Completed");
  bool found = false;
  for (const auto& finding : summary["findings"]) {
    if (finding["rule"] != "CPUBottleneck") continue;
    found = true;
    EXPECT_EQ(finding["status"], "IssuesFound");
    EXPECT_EQ(finding["parameters"]["patience"], "0");
  }
  EXPECT_TRUE(found) << summary["findings"].dump();
  EXPECT_EQ(Status("live").rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound);
}

TEST_F(ProfilerSchedulingTest, AfterARestartTheReportOfAnIssuesFoundRuleStaysLive) {
  CreateJob("restarted", "ProfilerReport", {{"CPUBottleneck_patience", "0"}});
  WriteSamples("restarted", 400, 97, 3);
  WaitForStatus("restarted", v1::RuleEvaluationStatus::IssuesFound);
  scheduler_.reset();

  StartScheduler();
  WriteSamples("restarted", 20, 35, 90);
  // Replayed from the start, then the new data.
  WaitForReport("restarted", "ProfilerReport",
                [](const nlohmann::json& s) { return Points(s) == 420 * 5; });
  EndTraining("restarted");
  WaitForReport("restarted", "ProfilerReport",
                [](const nlohmann::json& s) { return s["final"] == true; });
}

TEST_F(ProfilerSchedulingTest, StoppingTheJobWritesTheFinalReport) {
  CreateJob("stopped", "ProfilerReport");
  WriteSamples("stopped", 30, 35, 90);
  WaitForReport("stopped", "ProfilerReport",
                [](const nlohmann::json& s) { return Points(s) == 30 * 5; });
  v1::StopTrainingJobRequest stop;
  stop.set_training_job_name("stopped");
  ASSERT_TRUE(CallSync<v1::StopTrainingJobResponse>(*manager_, &H::StopTrainingJob, stop).ok());
  nlohmann::json summary = WaitForReport(
      "stopped", "ProfilerReport", [](const nlohmann::json& s) { return s["final"] == true; });
  EXPECT_THAT(summary["training_job_status"].get<std::string>(), HasSubstr("Stop"));
  EXPECT_EQ(Points(summary), 30 * 5);
  // Once the job is Stopped (the training process is gone), the report says
  // so: its final status, not the Stopping it was written with first.
  ASSERT_EQ(WaitForJobStatus("stopped", v1::TrainingJobStatus::Stopped),
            v1::TrainingJobStatus::Stopped);
  summary = WaitForReport("stopped", "ProfilerReport", [](const nlohmann::json& s) {
    return s["training_job_status"] == "Stopped";
  });
  EXPECT_EQ(summary["final"], true);
  EXPECT_EQ(Points(summary), 30 * 5);
  EXPECT_THAT(WaitForReportHtml("stopped", "ProfilerReport", "<b id=\"job-status\">Stopped</b>"),
              HasSubstr("<b id=\"job-status\">Stopped</b>"));
}

TEST_F(ProfilerSchedulingTest, AStopWaitsForTheProcessAndTheReportEndsWithStopped) {
  CreateJob("stopping", "ProfilerReport");
  ReportTraining("stopping", v1::ReportTrainingStatusRequest::EVENT_STARTED);
  WriteSamples("stopping", 30, 35, 90);
  WaitForReport("stopping", "ProfilerReport",
                [](const nlohmann::json& s) { return Points(s) == 30 * 5; });
  v1::StopTrainingJobRequest stop;
  stop.set_training_job_name("stopping");
  ASSERT_TRUE(CallSync<v1::StopTrainingJobResponse>(*manager_, &H::StopTrainingJob, stop).ok());
  // The training process runs its SIGTERM handler: the job is Stopping, the
  // report final with that status.
  nlohmann::json summary = WaitForReport(
      "stopping", "ProfilerReport", [](const nlohmann::json& s) { return s["final"] == true; });
  EXPECT_EQ(summary["training_job_status"], "Stopping");
  ASSERT_EQ(manager_->GetJob("stopping")->training_job_status(), v1::TrainingJobStatus::Stopping);
  // The agent reports the exit: Stopped, and the report says so.
  ReportTraining("stopping", v1::ReportTrainingStatusRequest::EVENT_STOPPED);
  ASSERT_EQ(WaitForJobStatus("stopping", v1::TrainingJobStatus::Stopped),
            v1::TrainingJobStatus::Stopped);
  summary = WaitForReport("stopping", "ProfilerReport", [](const nlohmann::json& s) {
    return s["training_job_status"] == "Stopped";
  });
  EXPECT_EQ(summary["final"], true);
  EXPECT_EQ(Points(summary), 30 * 5);
  EXPECT_THAT(WaitForReportHtml("stopping", "ProfilerReport", "<b id=\"job-status\">Stopped</b>"),
              HasSubstr("<b id=\"job-status\">Stopped</b>"));
}

// The commits that reach the scheduler after a ProfilerReport concluded on
// training_job_end.ts (the debugging rule's verdict, progress) still show it
// InProgress. They once started it anew: a second evaluation read the data
// again and wrote a non-final report over the final one, and stayed active,
// with nothing to end it, until the job's end was reported.
TEST_F(ProfilerSchedulingTest, AReportConcludedOnTheTrialsEndIsNotStartedAgain) {
  constexpr int kJobs = 4;
  for (int j = 0; j < kJobs; ++j) {
    const std::string job = absl::StrCat("ended", j);
    CreateJobWithTrial(job);
    WriteSamples(job, 30, 35, 90);
    testing::TrialWriter writer(TrialDir(job).string());
    for (int step = 0; step < 3; ++step) {
      writer.AddStep(step, Mode::kTrain, step, {{"CrossEntropyLoss_output_0", {}, {0.5}}});
    }
    writer.EndTraining();
  }
  for (int j = 0; j < kJobs; ++j) {
    const std::string job = absl::StrCat("ended", j);
    WaitForStatus(job, v1::RuleEvaluationStatus::NoIssuesFound);
    WaitForReport(job, "ProfilerReport",
                  [](const nlohmann::json& s) { return s["final"] == true; });
  }
  // Time for a stray evaluation to start and write (it did within
  // milliseconds of the verdicts' commits).
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(scheduler_->active_jobs(), 0u);
  for (int j = 0; j < kJobs; ++j) {
    const std::string job = absl::StrCat("ended", j);
    const nlohmann::json summary =
        WaitForReport(job, "ProfilerReport", [](const nlohmann::json&) { return true; });
    EXPECT_EQ(summary["final"], true) << job;
    EXPECT_EQ(Points(summary), 30 * 5) << job;
  }
}

TEST_F(ProfilerSchedulingTest, AJobCompletedAfterItsTrialEndedHasItsFinalStatusInTheReport) {
  CreateJobWithTrial("closed");
  WriteSamples("closed", 30, 35, 90);
  testing::TrialWriter writer(TrialDir("closed").string());
  for (int step = 0; step < 3; ++step) {
    writer.AddStep(step, Mode::kTrain, step, {{"CrossEntropyLoss_output_0", {}, {0.5}}});
  }
  // One worker's training_job_end.ts: training ended, the report is final
  // before the agent reports the exit.
  writer.EndTraining();
  nlohmann::json summary = WaitForReport(
      "closed", "ProfilerReport", [](const nlohmann::json& s) { return s["final"] == true; });
  EXPECT_THAT(summary["training_job_status"].get<std::string>(),
              HasSubstr("InProgress; training data complete"));
  const std::string data_summary = summary["data_summary"];
  EndTraining("closed");
  summary = WaitForReport("closed", "ProfilerReport", [](const nlohmann::json& s) {
    return s["training_job_status"] == "Completed";
  });
  EXPECT_EQ(summary["final"], true);
  // Written again with the status only: the same data as the rule's verdict.
  EXPECT_EQ(summary["data_summary"], data_summary);
  EXPECT_THAT(WaitForReportHtml("closed", "ProfilerReport", "<b id=\"job-status\">Completed</b>"),
              HasSubstr("<b id=\"job-status\">Completed</b>"));
}

TEST_F(ProfilerSchedulingTest, WithSeveralWorkersTheFinalStatusAndReportCountDataAfterAMarker) {
  // Two workers (torch.distributed, one node each): worker_1 ends first and
  // writes training_job_end.ts; algo-2's metrics land after that. Training
  // ends when the job says so; the rule's status and the final report count
  // both nodes' files.
  CreateJobWithTrial("two-nodes");
  WriteSamples("two-nodes", 40, 35, 90, "algo-1");
  testing::TrialWriter worker0(TrialDir("two-nodes").string(), "worker_0", 2);
  testing::TrialWriter worker1(TrialDir("two-nodes").string(), "worker_1", 2);
  for (int step = 0; step < 3; ++step) {
    worker0.AddStep(step, Mode::kTrain, step, {{"CrossEntropyLoss_output_0", {}, {0.5}}});
    worker1.AddStep(step, Mode::kTrain, step, {{"CrossEntropyLoss_output_0", {}, {0.5}}});
  }
  worker1.EndTraining();
  WaitForReport("two-nodes", "ProfilerReport",
                [](const nlohmann::json& s) { return Points(s) == 40 * 5; });
  // Real time, on purpose: the marker changes nothing the test can observe,
  // so it gives the scheduler 300 ms to see it (and wrongly conclude, if it
  // would).
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(Status("two-nodes").rule_evaluation_status(), v1::RuleEvaluationStatus::InProgress);
  WriteSamples("two-nodes", 40, 35, 90, "algo-2");
  worker0.EndTraining();
  EndTraining("two-nodes");
  const v1::ProfilerRuleEvaluationStatus status =
      WaitForStatus("two-nodes", v1::RuleEvaluationStatus::NoIssuesFound);
  EXPECT_THAT(status.status_details(), HasSubstr("2 files, 400 points"));
  const nlohmann::json summary = WaitForReport(
      "two-nodes", "ProfilerReport", [](const nlohmann::json& s) { return s["final"] == true; });
  EXPECT_EQ(Points(summary), 80 * 5);
  EXPECT_THAT(summary["data_summary"].get<std::string>(), HasSubstr("2 files, 400 points"));
  EXPECT_EQ(summary["training_job_status"], "Completed");
}

TEST_F(ProfilerSchedulingTest, AReportAddedByAnUpdateDrawsTheDataReadBeforeIt) {
  CreateJob("added", "CPUBottleneck", {{"patience", "0"}});
  WriteSamples("added", 100, 35, 90);
  // The CPUBottleneck run reads them before the update.
  ASSERT_TRUE(WaitedFor("the samples to be read", [&] { return DataReads("added") > 0; }));

  v1::UpdateTrainingJobRequest update;
  update.set_training_job_name("added");
  auto* rule = update.add_profiler_rule_configurations();
  rule->set_rule_configuration_name("ProfilerReport");
  rule->set_rule_evaluator_image("builtin");
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = "ProfilerReport";
  ASSERT_TRUE(
      CallSync<v1::UpdateTrainingJobResponse>(*manager_, &H::UpdateTrainingJob, update).ok());
  // Everything, not only what comes after the update.
  WaitForReport("added", "ProfilerReport",
                [](const nlohmann::json& s) { return Points(s) == 100 * 5; });
  // The rule already running is not disturbed: a later bottleneck is found.
  WriteSamples("added", 300, 97, 3);
  v1::ProfilerRuleEvaluationStatus status =
      WaitForStatus("added", v1::RuleEvaluationStatus::IssuesFound);
  EXPECT_THAT(status.status_details(), HasSubstr("CPU bottleneck on algo-1"));
}

TEST_F(ProfilerSchedulingTest, HealthyDataEndsNoIssuesFoundWhenTrainingEnds) {
  CreateJob("healthy", "CPUBottleneck", {{"patience", "0"}});
  WriteSamples("healthy", 300, 35, 90);
  ASSERT_TRUE(WaitedFor("the samples to be read", [&] { return DataReads("healthy") > 0; }));
  EXPECT_EQ(Status("healthy").rule_evaluation_status(), v1::RuleEvaluationStatus::InProgress);
  EndTraining("healthy");
  v1::ProfilerRuleEvaluationStatus status =
      WaitForStatus("healthy", v1::RuleEvaluationStatus::NoIssuesFound);
  EXPECT_THAT(status.status_details(), HasSubstr("algo-1"));
}

TEST_F(ProfilerSchedulingTest, NoDataEndsInAnErrorNamingTheDirectory) {
  CreateJob("empty", "LowGPUUtilization");
  EndTraining("empty");
  v1::ProfilerRuleEvaluationStatus status = WaitForStatus("empty", v1::RuleEvaluationStatus::Error);
  EXPECT_THAT(status.status_details(), HasSubstr("no system metrics"));
  EXPECT_THAT(status.status_details(), HasSubstr(ProfilerDir("empty").string()));
}

TEST_F(ProfilerSchedulingTest, ACustomEvaluatorOnAProfilerRuleIsAnErrorSayingWhy) {
  CreateJob("custom", "CPUBottleneck", {}, "", "my-profiler:latest");
  v1::ProfilerRuleEvaluationStatus status =
      WaitForStatus("custom", v1::RuleEvaluationStatus::Error);
  EXPECT_THAT(status.status_details(), HasSubstr("'my-profiler:latest'"));
  EXPECT_THAT(status.status_details(), HasSubstr("debugging rules only"));
}

TEST_F(ProfilerSchedulingTest, ObjectStorageProfilerOutputIsAnErrorSayingSo) {
  CreateJob("remote", "CPUBottleneck", {}, "s3://bucket/profiler");
  v1::ProfilerRuleEvaluationStatus status =
      WaitForStatus("remote", v1::RuleEvaluationStatus::Error);
  EXPECT_THAT(status.status_details(), HasSubstr("ProfilerConfig.S3OutputPath"));
  EXPECT_THAT(status.status_details(), HasSubstr("object storage"));
}

}  // namespace
}  // namespace debugplane::rules_engine
