// Profiler rules end to end: the real server evaluates ProfilerRuleConfigurations
// on profiler output (the fixtures read in place, and a live writer), the
// rules reach the outcomes tests/data/README.md requires, ProfilerReport writes
// its report, and GetProfilerReport serves it.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "debugplane/v1/profiler_report.grpc.pb.h"
#include "debugplane/v1/training_agent.grpc.pb.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/service/server_process.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/support/wait_until.h"

namespace debugplane {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::Context;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::debugplane::testing::WaitUntil;
using ::testing::HasSubstr;

const fs::path kFixtures = fs::canonical(fs::path(DP_TEST_DATA_DIR));
constexpr char kRulesImage[] =
    "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest";

void AddProfilerRule(v1::CreateTrainingJobRequest& request, const std::string& name,
                     const std::string& rule_to_invoke,
                     const std::map<std::string, std::string>& parameters = {}) {
  auto* rule = request.add_profiler_rule_configurations();
  rule->set_rule_configuration_name(name);
  rule->set_rule_evaluator_image(kRulesImage);
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = rule_to_invoke;
  for (const auto& [key, value] : parameters) (*rule->mutable_rule_parameters())[key] = value;
}

v1::CreateTrainingJobRequest ProfiledJob(const std::string& name, const fs::path& profiler_dir) {
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(name);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
  request.mutable_profiler_config()->set_s3_output_path("file://" + profiler_dir.string());
  return request;
}

using Statuses = std::map<std::string, v1::ProfilerRuleEvaluationStatus>;

// Watches the job until `done(statuses)` holds or the deadline passes;
// returns the last statuses seen.
template <typename Done>
Statuses WatchProfilerRules(v1::TrainingJobService::Stub& stub, const std::string& job, Done done,
                            int seconds = 60) {
  v1::WatchTrainingJobRequest request;
  request.set_training_job_name(job);
  auto context = Context(seconds);
  auto reader = stub.WatchTrainingJob(context.get(), request);
  v1::WatchTrainingJobResponse event;
  Statuses statuses;
  while (reader->Read(&event)) {
    for (const auto& status : event.profiler_rule_evaluation_statuses()) {
      statuses[status.rule_configuration_name()] = status;
    }
    if (done(statuses)) break;
  }
  context->TryCancel();
  return statuses;
}

bool Terminal(const v1::ProfilerRuleEvaluationStatus& status) {
  const auto s = status.rule_evaluation_status();
  return s != v1::RuleEvaluationStatus::InProgress && s != v1::RuleEvaluationStatus::Stopping &&
         s != v1::RuleEvaluationStatus::RULE_EVALUATION_STATUS_UNSPECIFIED;
}

auto AllTerminal(size_t rules) {
  return [rules](const Statuses& statuses) {
    if (statuses.size() < rules) return false;
    for (const auto& [name, status] : statuses) {
      if (!Terminal(status)) return false;
    }
    return true;
  };
}

void EndTraining(const ServerProcess& server, const std::string& job) {
  auto agent = v1::TrainingAgentService::NewStub(server.Channel());
  v1::ReportTrainingStatusRequest request;
  request.set_training_job_name(job);
  request.set_event(v1::ReportTrainingStatusRequest::EVENT_COMPLETED);
  v1::ReportTrainingStatusResponse response;
  grpc::Status status = agent->ReportTrainingStatus(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
}

absl::StatusOr<v1::GetProfilerReportResponse> FetchReport(const ServerProcess& server,
                                                          const std::string& job, bool json,
                                                          const std::string& rule = "") {
  auto stub = v1::ProfilerReportService::NewStub(server.Channel());
  v1::GetProfilerReportRequest request;
  request.set_training_job_name(job);
  request.set_rule_configuration_name(rule);
  request.set_format(json ? v1::ProfilerReportFormat::JSON : v1::ProfilerReportFormat::HTML);
  v1::GetProfilerReportResponse response;
  grpc::Status status = stub->GetProfilerReport(Context().get(), request, &response);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  }
  return response;
}

class ProfilerRulesTest : public ::testing::Test {
 protected:
  ScopedTempDir dir_;
  ServerProcess server_{dir_.path(),
                        {"--data-root", kFixtures.string(), "--data-root", dir_.path().string()}};
};

TEST_F(ProfilerRulesTest, SystemFixturesReachTheOutcomesTheReadmeRequires) {
  // tests/data/README.md, profiler/system table: each folder's bottleneck is
  // IssuesFound; the healthy run has none.
  const std::map<std::string, std::string> bottleneck_of = {
      {"low_gpu_utilization", "LowGPUUtilization"},
      {"cpu_bottleneck", "CPUBottleneck"},
      {"io_bottleneck", "IOBottleneck"},
      {"gpu_memory_increase", "GPUMemoryIncrease"},
  };
  auto stub = server_.Stub();
  for (const auto& [folder, bottleneck] : bottleneck_of) {
    std::string job = absl::StrCat("system-", folder);
    std::replace(job.begin(), job.end(), '_', '-');
    v1::CreateTrainingJobRequest request =
        ProfiledJob(job, kFixtures / "profiler" / "system" / folder);
    AddProfilerRule(request, bottleneck, bottleneck);
    v1::CreateTrainingJobResponse created;
    grpc::Status status = stub->CreateTrainingJob(Context().get(), request, &created);
    ASSERT_TRUE(status.ok()) << folder << ": " << status.error_message();
    // The data is all there: IssuesFound comes without the end of training.
    Statuses statuses = WatchProfilerRules(*stub, job, AllTerminal(1));
    EXPECT_EQ(statuses[bottleneck].rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound)
        << folder << ": " << statuses[bottleneck].status_details();
  }

  const std::string healthy = "system-healthy";
  v1::CreateTrainingJobRequest request =
      ProfiledJob(healthy, kFixtures / "profiler" / "system" / "healthy");
  for (const auto& [folder, rule] : bottleneck_of) AddProfilerRule(request, rule, rule);
  v1::CreateTrainingJobResponse created;
  ASSERT_TRUE(stub->CreateTrainingJob(Context().get(), request, &created).ok());
  EndTraining(server_, healthy);
  Statuses statuses = WatchProfilerRules(*stub, healthy, AllTerminal(bottleneck_of.size()));
  for (const auto& [folder, rule] : bottleneck_of) {
    EXPECT_EQ(statuses[rule].rule_evaluation_status(), v1::RuleEvaluationStatus::NoIssuesFound)
        << rule << ": " << statuses[rule].status_details();
  }
}

TEST_F(ProfilerRulesTest, StepOutlierNamesTheSlowStepsAndTheReportIsServed) {
  auto stub = server_.Stub();
  const std::string job = "framework-outliers";
  v1::CreateTrainingJobRequest request =
      ProfiledJob(job, kFixtures / "profiler" / "framework" / "pytorch-step-outlier");
  AddProfilerRule(request, "StepOutlier", "StepOutlier");
  AddProfilerRule(request, "ProfilerReport", "ProfilerReport");
  v1::CreateTrainingJobResponse created;
  ASSERT_TRUE(stub->CreateTrainingJob(Context().get(), request, &created).ok());

  EndTraining(server_, job);
  Statuses statuses = WatchProfilerRules(*stub, job, AllTerminal(2));
  EXPECT_EQ(statuses["StepOutlier"].rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound)
      << statuses["StepOutlier"].status_details();
  // The report run found the same outliers.
  EXPECT_EQ(statuses["ProfilerReport"].rule_evaluation_status(),
            v1::RuleEvaluationStatus::IssuesFound)
      << statuses["ProfilerReport"].status_details();
  EXPECT_THAT(statuses["ProfilerReport"].status_details(), HasSubstr("StepOutlier"));

  // The final report: regenerated when training ended.
  absl::StatusOr<v1::GetProfilerReportResponse> json;
  WaitUntil(
      [&] {
        json = FetchReport(server_, job, /*json=*/true);
        return json.ok() && nlohmann::json::parse(json->content())["final"] == true;
      },
      absl::Seconds(20));
  ASSERT_TRUE(json.ok()) << json.status();
  const nlohmann::json summary = nlohmann::json::parse(json->content());
  EXPECT_EQ(summary["final"], true);
  EXPECT_EQ(json->rule_configuration_name(), "ProfilerReport");
  EXPECT_TRUE(json->final());
  EXPECT_GE(summary["steps"]["count"].get<int64_t>(), 640);
  // The outliers the report marks are StepOutlier's (12 slow steps).
  EXPECT_EQ(summary["steps"]["outlier_steps"].size(), 12u) << summary["steps"].dump();
  bool step_outlier_found = false;
  for (const auto& finding : summary["findings"]) {
    if (finding["rule"] == "StepOutlier") {
      step_outlier_found = true;
      EXPECT_EQ(finding["status"], "IssuesFound");
      EXPECT_EQ(finding["parameters"]["stddev"], "5");
    }
  }
  EXPECT_TRUE(step_outlier_found) << summary["findings"].dump();

  absl::StatusOr<v1::GetProfilerReportResponse> html = FetchReport(server_, job, /*json=*/false);
  ASSERT_TRUE(html.ok()) << html.status();
  EXPECT_THAT(html->content(), HasSubstr("<html"));
  EXPECT_THAT(html->content(), HasSubstr("chart-step-histogram"));
  EXPECT_THAT(html->path(), HasSubstr("profiler-report.html"));
  EXPECT_TRUE(fs::exists(html->path()));
}

TEST_F(ProfilerRulesTest, ABottleneckLandingIsIssuesFoundWithinOneScan) {
  // A live writer appends system metrics; scan_interval_us is ten minutes,
  // an upper bound, so a verdict within seconds shows the data is evaluated
  // as it lands.
  const fs::path profiler = dir_.path() / "live-profiler";
  const fs::path hour_dir = profiler / "system" / "incremental" / "2026112207";
  auto stub = server_.Stub();
  const std::string job = "live-bottleneck";
  v1::CreateTrainingJobRequest request = ProfiledJob(job, profiler);
  AddProfilerRule(request, "CPUBottleneck", "CPUBottleneck",
                  {{"patience", "0"}, {"scan_interval_us", "600000000"}});
  v1::CreateTrainingJobResponse created;
  ASSERT_TRUE(stub->CreateTrainingJob(Context().get(), request, &created).ok());

  fs::create_directories(hour_dir);
  std::ofstream out(hour_dir / "1795331436.algo-1.json", std::ios::app);
  double timestamp = 1795331436.0;
  auto write_samples = [&](int samples, double cpu, double gpu) {
    for (int i = 0; i < samples; ++i, timestamp += 0.5) {
      for (int core = 0; core < 4; ++core) {
        out << absl::StrFormat(
            "{\"Type\": \"cpu\", \"Name\": \"cpu%d\", \"Dimension\": \"CPUUtilization\", "
            "\"Value\": %.1f, \"NodeId\": \"algo-1\", \"Timestamp\": %.3f}\n",
            core, cpu, timestamp);
      }
      out << absl::StrFormat(
          "{\"Type\": \"gpu\", \"Name\": \"gpu0\", \"Dimension\": \"GPUUtilization\", "
          "\"Value\": %.1f, \"NodeId\": \"algo-1\", \"Timestamp\": %.3f}\n",
          gpu, timestamp);
    }
    out.flush();
  };
  // Healthy first: no verdict.
  write_samples(150, 35, 90);
  absl::SleepFor(absl::Milliseconds(300));
  v1::DescribeTrainingJobRequest describe;
  describe.set_training_job_name(job);
  v1::DescribeTrainingJobResponse described;
  ASSERT_TRUE(stub->DescribeTrainingJob(Context().get(), describe, &described).ok());
  ASSERT_EQ(described.profiler_rule_evaluation_statuses(0).rule_evaluation_status(),
            v1::RuleEvaluationStatus::InProgress)
      << described.profiler_rule_evaluation_statuses(0).status_details();

  // Then a long CPU bottleneck (more than half of all samples).
  const absl::Time landed = absl::Now();
  write_samples(400, 97, 3);
  Statuses statuses = WatchProfilerRules(*stub, job, AllTerminal(1), /*seconds=*/30);
  const absl::Duration elapsed = absl::Now() - landed;
  EXPECT_EQ(statuses["CPUBottleneck"].rule_evaluation_status(),
            v1::RuleEvaluationStatus::IssuesFound)
      << statuses["CPUBottleneck"].status_details();
  EXPECT_THAT(statuses["CPUBottleneck"].status_details(), HasSubstr("CPU bottleneck on algo-1"));
  // Far below the ten-minute scan interval (generous for loaded machines).
  EXPECT_LT(elapsed, absl::Seconds(20));
}

TEST_F(ProfilerRulesTest, BadProfilerRuleParametersAreRefusedNamingTheField) {
  auto stub = server_.Stub();
  v1::CreateTrainingJobRequest request = ProfiledJob("bad-params", dir_.path() / "p");
  AddProfilerRule(request, "cpu", "CPUBottleneck", {{"cpu_threshold", "high"}});
  v1::CreateTrainingJobResponse created;
  grpc::Status status = stub->CreateTrainingJob(Context().get(), request, &created);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("ProfilerRuleConfigurations[0].RuleParameters"));
  EXPECT_THAT(status.error_message(), HasSubstr("cpu_threshold"));

  v1::CreateTrainingJobRequest report = ProfiledJob("bad-override", dir_.path() / "p");
  AddProfilerRule(report, "report", "ProfilerReport", {{"CPUBottlenek_threshold", "20"}});
  status = stub->CreateTrainingJob(Context().get(), report, &created);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("CPUBottlenek_threshold"));

  v1::CreateTrainingJobRequest bad_value = ProfiledJob("bad-override-value", dir_.path() / "p");
  AddProfilerRule(bad_value, "report", "ProfilerReport", {{"StepOutlier_stddev", "-1"}});
  status = stub->CreateTrainingJob(Context().get(), bad_value, &created);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("stddev"));
}

TEST_F(ProfilerRulesTest, ARuleAddedByUpdateTrainingJobStartsAtOnce) {
  auto stub = server_.Stub();
  const std::string job = "added-later";
  v1::CreateTrainingJobRequest request =
      ProfiledJob(job, kFixtures / "profiler" / "system" / "cpu_bottleneck");
  v1::CreateTrainingJobResponse created;
  ASSERT_TRUE(stub->CreateTrainingJob(Context().get(), request, &created).ok());

  v1::UpdateTrainingJobRequest update;
  update.set_training_job_name(job);
  auto* rule = update.add_profiler_rule_configurations();
  rule->set_rule_configuration_name("cpu-late");
  rule->set_rule_evaluator_image(kRulesImage);
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = "CPUBottleneck";
  // A bad one is refused, naming the field.
  v1::UpdateTrainingJobRequest bad = update;
  (*bad.mutable_profiler_rule_configurations(0)->mutable_rule_parameters())["threshold"] = "200";
  v1::UpdateTrainingJobResponse updated;
  grpc::Status status = stub->UpdateTrainingJob(Context().get(), bad, &updated);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("threshold"));

  ASSERT_TRUE(stub->UpdateTrainingJob(Context().get(), update, &updated).ok());
  Statuses statuses = WatchProfilerRules(*stub, job, AllTerminal(1));
  EXPECT_EQ(statuses["cpu-late"].rule_evaluation_status(), v1::RuleEvaluationStatus::IssuesFound)
      << statuses["cpu-late"].status_details();
}

TEST_F(ProfilerRulesTest, ReportErrorsNameTheCause) {
  auto stub = server_.Stub();
  v1::CreateTrainingJobRequest request = ProfiledJob("no-report", dir_.path() / "p");
  AddProfilerRule(request, "cpu", "CPUBottleneck");
  v1::CreateTrainingJobResponse created;
  ASSERT_TRUE(stub->CreateTrainingJob(Context().get(), request, &created).ok());

  absl::StatusOr<v1::GetProfilerReportResponse> report = FetchReport(server_, "no-report", true);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(report.status().message(), HasSubstr("no ProfilerReport rule"));
  report = FetchReport(server_, "no-report", true, "cpu");
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(report.status().message(), HasSubstr("not a ProfilerReport"));
  report = FetchReport(server_, "missing-job", true);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kNotFound);
  report = FetchReport(server_, "bad_name!", true);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
}

// PyTorch profiler traces (tests/data/frameworks, the README's expectations):
// the H200 run's trace, found under TensorBoardOutputConfig.S3OutputPath
// beside the run's system metrics, takes the framework rules out of Error
// and the report shows its four ~150 ms steps; the data-loader-bound trace
// makes data loading the dominant phase and the report names the data
// loader as the bottleneck.
TEST_F(ProfilerRulesTest, PyTorchTracesAreTheFrameworkTimeline) {
  auto stub = server_.Stub();
  const fs::path h200 = kFixtures / "frameworks" / "pytorch-h200-phases";
  v1::CreateTrainingJobRequest request = ProfiledJob("h200-trace", h200 / "profiler");
  request.mutable_tensor_board_output_config()->set_s3_output_path("file://" +
                                                                   (h200 / "trace").string());
  v1::CreateTrainingJobRequest loader =
      ProfiledJob("dataloader-trace", kFixtures / "frameworks" / "pytorch-dataloader-trace");
  for (v1::CreateTrainingJobRequest* r : {&request, &loader}) {
    for (const char* rule :
         {"StepOutlier", "OverallFrameworkMetrics", "MaxInitializationTime", "ProfilerReport"}) {
      AddProfilerRule(*r, rule, rule);
    }
    v1::CreateTrainingJobResponse created;
    ASSERT_TRUE(stub->CreateTrainingJob(Context().get(), *r, &created).ok());
    EndTraining(server_, r->training_job_name());
  }

  Statuses statuses = WatchProfilerRules(*stub, "h200-trace", AllTerminal(4));
  for (const auto& [name, status] : statuses) {
    EXPECT_NE(status.rule_evaluation_status(), v1::RuleEvaluationStatus::Error)
        << name << ": " << status.status_details();
  }
  EXPECT_THAT(statuses["OverallFrameworkMetrics"].status_details(), HasSubstr("4 steps (TRAIN 4"));
  absl::StatusOr<v1::GetProfilerReportResponse> json;
  WaitUntil(
      [&] {
        json = FetchReport(server_, "h200-trace", /*json=*/true);
        return json.ok() && nlohmann::json::parse(json->content())["final"] == true;
      },
      absl::Seconds(20));
  ASSERT_TRUE(json.ok()) << json.status();
  const nlohmann::json report = nlohmann::json::parse(json->content());
  EXPECT_EQ(report["steps"]["count"], 4) << report["steps"].dump();
  EXPECT_THAT(report["data_summary"].get<std::string>(), HasSubstr("1 PyTorch trace, "));
  const double median_ms = report["steps"]["p50_ms"].get<double>();
  EXPECT_GT(median_ms, 120);
  EXPECT_LT(median_ms, 180);

  statuses = WatchProfilerRules(*stub, "dataloader-trace", AllTerminal(4));
  const std::string overall = statuses["OverallFrameworkMetrics"].status_details();
  EXPECT_THAT(overall, HasSubstr("6 steps"));
  EXPECT_THAT(overall, HasSubstr("the data loader is the bottleneck"));
  WaitUntil(
      [&] {
        json = FetchReport(server_, "dataloader-trace", /*json=*/true);
        return json.ok() && nlohmann::json::parse(json->content())["final"] == true;
      },
      absl::Seconds(20));
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(json->content(), HasSubstr("the data loader is the bottleneck"));
}

// A trace landing in a running job's framework/pytorch/<node>/ (where
// debugplane_profiler writes when a window ends) is in the job's
// ProfilerReport within 2 s (issue 25): the trial watcher hears it
// (inotify) and wakes the job's reading.
TEST_F(ProfilerRulesTest, ATraceWrittenIntoARunningJobIsReadWithinTwoSeconds) {
  auto stub = server_.Stub();
  const fs::path profiler = dir_.path() / "traced";
  fs::create_directories(profiler);
  v1::CreateTrainingJobRequest request = ProfiledJob("traced", profiler);
  AddProfilerRule(request, "ProfilerReport", "ProfilerReport");
  v1::CreateTrainingJobResponse created;
  ASSERT_TRUE(stub->CreateTrainingJob(Context().get(), request, &created).ok());
  // The job's first looks find no trace, and the report's regeneration
  // interval (2 s) has passed when the trace lands.
  absl::SleepFor(absl::Milliseconds(2500));
  const auto steps_in_report = [&]() -> int {
    absl::StatusOr<v1::GetProfilerReportResponse> json =
        FetchReport(server_, "traced", /*json=*/true);
    if (!json.ok()) return -1;
    const nlohmann::json report = nlohmann::json::parse(json->content(), nullptr, false);
    if (!report.is_object() || !report.contains("steps")) return 0;
    return report["steps"].value("count", 0);
  };
  EXPECT_LE(steps_in_report(), 0);
  const fs::path node = profiler / "framework" / "pytorch" / "algo-1";
  fs::create_directories(node);
  // Written beside and renamed in, as a whole file lands.
  const fs::path trace = kFixtures / "frameworks" / "pytorch-h200-phases" / "trace" /
                         "vm_659.1795819707712812939.pt.trace.json";
  fs::copy_file(trace, profiler / "framework" / "partial.tmp");
  const absl::Time landed = absl::Now();
  fs::rename(profiler / "framework" / "partial.tmp", node / trace.filename());
  int steps = 0;
  WaitUntil(
      [&] {
        steps = steps_in_report();
        return steps == 4;
      },
      absl::Seconds(20));
  const absl::Duration elapsed = absl::Now() - landed;
  EXPECT_EQ(steps, 4);
  EXPECT_LT(elapsed, absl::Seconds(2));
  std::printf("the trace was in the report %s after it landed\n",
              absl::FormatDuration(elapsed).c_str());
}

}  // namespace
}  // namespace debugplane
