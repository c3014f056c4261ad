// A hostile training job, end to end: the real server evaluates rules (and
// the dashboard ingests profiler data) of jobs whose output has sparse
// 100 GB files (ftruncate: no disk used) for an index JSON, an event file
// and its index entry, a system-metrics file and a framework timeline; NaN
// and infinities where numbers are expected; a FIFO; and a file growing
// while it is read. The server must stay up with bounded memory, each rule
// must say what is wrong (the file and the limit), and a restart on the
// same data must serve again. Before the read limits, each sparse file
// made the server read it whole: std::bad_alloc, at every restart.

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/rules_engine/trial_writer.h"
#include "tests/service/dashboard/dashboard_client.h"
#include "tests/service/server_process.h"

namespace debugplane {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::CallDashboard;
using ::debugplane::testing::Context;
using ::debugplane::testing::ScopedTempDir;
using ::debugplane::testing::ServerProcess;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int64_t kHundredGb = int64_t{100} << 30;
constexpr char kLoss[] = "CrossEntropyLoss_output_0";
constexpr char kRulesImage[] =
    "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest";

void MakeSparse(const fs::path& path, int64_t size) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::app).close();
  ASSERT_EQ(::truncate(path.c_str(), size), 0) << path;
}

void Append(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary | std::ios::app);
  out << text;
}

// A kB figure of /proc/<pid>/status ("VmHWM", "VmRSS"); -1 if not there.
int64_t ProcStatusKb(pid_t pid, const std::string& field) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    int64_t kb = -1;
    const std::string digits = line.substr(field.size() + 1, line.size() - field.size() - 4);
    if (absl::SimpleAtoi(digits, &kb)) return kb;
  }
  return -1;
}

std::string MetricLine(const std::string& value, const std::string& timestamp) {
  return absl::StrCat(
      "{\"Type\": \"cpu\", \"Name\": \"cpu0\", \"Dimension\": \"CPUUtilization\", \"Value\": ",
      value, ", \"NodeId\": \"algo-1\", \"Timestamp\": ", timestamp, "}\n");
}

constexpr char kTimelineStart[] =
    "[\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": "
    "{\"start_time_since_epoch_in_micros\": 1795331436525518}},\n";

class HostileTrialTest : public ::testing::Test {
 protected:
  // A job reading `trial` (debug rule LossNotDecreasing) and/or `profiler`
  // (CPUBottleneck on system metrics, StepOutlier on the timelines).
  v1::CreateTrainingJobRequest Job(const std::string& name, const fs::path& trial,
                                   const fs::path& profiler) {
    v1::CreateTrainingJobRequest request;
    request.set_training_job_name(name);
    request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
    request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
    if (!trial.empty()) {
      request.mutable_debug_hook_config()->set_s3_output_path("file://" + trial.string());
      auto* rule = request.add_debug_rule_configurations();
      rule->set_rule_configuration_name("LossNotDecreasing");
      rule->set_rule_evaluator_image(kRulesImage);
      (*rule->mutable_rule_parameters())["rule_to_invoke"] = "LossNotDecreasing";
    }
    if (!profiler.empty()) {
      request.mutable_profiler_config()->set_s3_output_path("file://" + profiler.string());
      for (const char* name : {"CPUBottleneck", "StepOutlier"}) {
        auto* rule = request.add_profiler_rule_configurations();
        rule->set_rule_configuration_name(name);
        rule->set_rule_evaluator_image(kRulesImage);
        (*rule->mutable_rule_parameters())["rule_to_invoke"] = name;
      }
    }
    return request;
  }

  void Create(const v1::CreateTrainingJobRequest& request) {
    v1::CreateTrainingJobResponse created;
    grpc::Status status = server_->Stub()->CreateTrainingJob(Context().get(), request, &created);
    ASSERT_TRUE(status.ok()) << request.training_job_name() << ": " << status.error_message();
  }

  // "rule: status: details" of every rule of `job`, as the server says.
  std::map<std::string, std::string> Statuses(const std::string& job) {
    v1::DescribeTrainingJobRequest request;
    request.set_training_job_name(job);
    v1::DescribeTrainingJobResponse response;
    std::map<std::string, std::string> out;
    if (!server_->Stub()->DescribeTrainingJob(Context().get(), request, &response).ok()) return out;
    for (const auto& s : response.debug_rule_evaluation_statuses()) {
      out[s.rule_configuration_name()] =
          absl::StrCat(v1::RuleEvaluationStatus::Value_Name(s.rule_evaluation_status()), ": ",
                       s.status_details());
    }
    for (const auto& s : response.profiler_rule_evaluation_statuses()) {
      out[s.rule_configuration_name()] =
          absl::StrCat(v1::RuleEvaluationStatus::Value_Name(s.rule_evaluation_status()), ": ",
                       s.status_details());
    }
    return out;
  }

  // Waits until `rule` of `job` is in Error and returns its details.
  std::string WaitForError(const std::string& job, const std::string& rule, int seconds = 60) {
    std::string last;
    const absl::Time deadline = absl::Now() + absl::Seconds(seconds);
    while (absl::Now() < deadline && server_->running()) {
      last = Statuses(job)[rule];
      if (last.rfind("Error: ", 0) == 0) return last;
      absl::SleepFor(absl::Milliseconds(100));
    }
    ADD_FAILURE() << job << " " << rule << " never reached Error; last: " << last;
    return last;
  }

  void ExpectUpWithBoundedMemory() {
    ASSERT_TRUE(server_->running()) << "the server died";
    const int64_t peak_kb = ProcStatusKb(server_->pid(), "VmHWM");
    ASSERT_GT(peak_kb, 0);
    EXPECT_LT(peak_kb, 1 << 20) << "peak RSS " << peak_kb << " kB";
    RecordProperty("peak_rss_kb", static_cast<int>(peak_kb));
    EXPECT_FALSE(Statuses("index-job").empty()) << "the server does not answer";
  }

  ScopedTempDir dir_;
  std::unique_ptr<ServerProcess> server_ = std::make_unique<ServerProcess>(
      dir_.path() / "data", testing::WithHttp({"--data-root", dir_.path().string()}));
};

TEST_F(HostileTrialTest, HugeSparseFilesEndTheirRulesNamingFileAndLimitAndTheServerStaysUp) {
  using rules_engine::Mode;
  using rules_engine::testing::TrialWriter;
  // A trial whose index file of step 1 claims 100 GB.
  TrialWriter index_trial((dir_.path() / "index-trial").string());
  index_trial.AddStep(0, Mode::kTrain, 0, {{kLoss, {}, {0.9}}});
  index_trial.AddStep(1, Mode::kTrain, 1, {{kLoss, {}, {0.8}}});
  MakeSparse(index_trial.IndexFile(1), kHundredGb);
  // A trial whose event file claims 100 GB and whose index says one record
  // of step 1 is 1 TiB long.
  TrialWriter event_trial((dir_.path() / "event-trial").string());
  event_trial.AddStep(0, Mode::kTrain, 0, {{kLoss, {}, {0.9}}});
  event_trial.AddStep(1, Mode::kTrain, 1, {{kLoss, {}, {0.8}}});
  MakeSparse(event_trial.EventFile(0), kHundredGb);
  ASSERT_TRUE(rules_engine::testing::WriteFile(
      event_trial.IndexFile(1),
      absl::StrCat("{\"meta\": {\"mode\": \"TRAIN\", \"mode_step\": 1, \"event_file_name\": "
                   "\"events/000000000001/000000000001_worker_0.tfevents\"}, "
                   "\"tensor_payload\": [{\"tensorname\": \"",
                   kLoss, "\", \"start_idx\": 0, \"length\": 1099511627776}]}")));
  // Profiler output: a sparse metrics file among real ones (with NaN and
  // infinities where numbers go), a FIFO, and a sparse timeline.
  const fs::path profiler = dir_.path() / "profiler";
  const fs::path hour = profiler / "system/incremental/2026112207";
  Append(hour / "1795300000.algo-1.json",
         MetricLine("50", "1795300000.5") + MetricLine("NaN", "1795300001.5") +
             MetricLine("Infinity", "1795300002.5") + MetricLine("-Infinity", "NaN") +
             MetricLine("1e999", "Infinity"));
  const fs::path sparse_metrics = hour / "1795300060.algo-1.json";
  MakeSparse(sparse_metrics, kHundredGb);
  ASSERT_EQ(::mkfifo((hour / "1795300120.algo-1.json").c_str(), 0600), 0);
  const fs::path pevents = profiler / "framework/pevents/2026112207";
  const fs::path sparse_timeline = pevents / "1795331438761047_11570-vm_pythontimeline.json";
  MakeSparse(sparse_timeline, kHundredGb);
  // A metrics file that grows while it is read, in a job of its own.
  const fs::path growing_profiler = dir_.path() / "growing";
  const fs::path growing =
      growing_profiler / "system/incremental/2026112207/1795300000.algo-1.json";
  Append(growing, MetricLine("10", "1795300000.5"));
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int i = 1; !stop && i < 200000; ++i) {
      Append(growing, MetricLine(i % 3 == 0 ? "NaN" : "10", absl::StrCat(1795300000 + i, ".5")));
      if (i % 100 == 0) absl::SleepFor(absl::Milliseconds(1));
    }
  });

  Create(Job("index-job", dir_.path() / "index-trial", {}));
  Create(Job("event-job", dir_.path() / "event-trial", {}));
  Create(Job("profiler-job", {}, profiler));
  Create(Job("growing-job", {}, growing_profiler));

  const auto check_rules = [&] {
    EXPECT_THAT(WaitForError("index-job", "LossNotDecreasing"),
                AllOf(HasSubstr(index_trial.IndexFile(1)), HasSubstr("107374182400 bytes"),
                      HasSubstr("16 MiB")));
    EXPECT_THAT(WaitForError("event-job", "LossNotDecreasing"),
                AllOf(HasSubstr(event_trial.EventFile(1)), HasSubstr("128 MiB")));
    EXPECT_THAT(WaitForError("profiler-job", "CPUBottleneck"),
                AllOf(HasSubstr(sparse_metrics.string()), HasSubstr("1 MiB")));
    EXPECT_THAT(WaitForError("profiler-job", "StepOutlier"),
                AllOf(HasSubstr(sparse_timeline.string()), HasSubstr("1 MiB")));
  };
  check_rules();
  // The dashboard's views of the profiled job load; the Nodes view says
  // what is wrong (its problems).
  for (const char* view : {"system", "framework"}) {
    const testing::DashboardReply reply = CallDashboard(
        "GET", absl::StrCat(server_->http_endpoint(), "/api/jobs/profiler-job/", view));
    EXPECT_EQ(reply.status, 200) << view << ": " << reply.error << reply.body;
    if (std::string(view) == "system") {
      EXPECT_THAT(reply.body, AllOf(HasSubstr(sparse_metrics.string()), HasSubstr("1 MiB")));
    }
  }
  const testing::DashboardReply live =
      CallDashboard("GET", absl::StrCat(server_->http_endpoint(), "/api/jobs/growing-job/system"));
  EXPECT_EQ(live.status, 200) << live.error << live.body;
  absl::SleepFor(absl::Seconds(1));  // The growing file read a few times over.
  stop = true;
  writer.join();
  ExpectUpWithBoundedMemory();

  // The same data after a restart: up, serving, the same errors.
  server_->Restart();
  check_rules();
  absl::SleepFor(absl::Seconds(1));
  ExpectUpWithBoundedMemory();
  EXPECT_EQ(
      CallDashboard("GET", absl::StrCat(server_->http_endpoint(), "/api/jobs/profiler-job/system"))
          .status,
      200);
  ExpectUpWithBoundedMemory();
}

}  // namespace
}  // namespace debugplane
