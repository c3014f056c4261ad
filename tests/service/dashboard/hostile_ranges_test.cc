// Hostile numbers against a real in-process server (ServerApp with
// --http-listen, no credentials, loopback): query ranges a client makes up
// (huge, negative, reversed, not finite) and training output with extreme
// timestamps. The server must answer (400 naming the parameter, or a 200
// with sane bucket times), keep serving, and say what it skipped; and do so
// again after a restart on the same data.

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/server_app.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/service/dashboard/dashboard_client.h"
#include "tests/support/wait_until.h"

namespace debugplane::service {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::CallDashboard;
using ::debugplane::testing::DashboardReply;
using ::debugplane::testing::ScopedTempDir;
using ::testing::HasSubstr;
using json = nlohmann::json;

// The job's data as if replayed two days after it ran.
const double kDataStart =
    std::floor(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch())) - 2 * 24 * 3600;
constexpr int kSamples = 120;  // One a second per CPU.

class HostileRangesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StartServer();
    profiler_ = dir_.path() / "data" / "job" / "profiler";  // Under the data root.
    fs::create_directories(profiler_);
  }

  void StartServer() {
    ServerConfig config;
    config.grpc.listen_address = "127.0.0.1:0";
    config.http_listen_address = "127.0.0.1:0";
    config.data_dir = (dir_.path() / "data").string();
    config.shutdown_grace = absl::ZeroDuration();
    auto app = ServerApp::Start(config);
    ASSERT_TRUE(app.ok()) << app.status();
    app_ = *std::move(app);
  }

  void CreateJob() {
    v1::CreateTrainingJobRequest request;
    request.set_training_job_name("job");
    request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
    request.mutable_output_data_config()->set_s3_output_path("s3://bucket/output");
    request.mutable_profiler_config()->set_s3_output_path(profiler_.string());
    auto* rule = request.add_profiler_rule_configurations();
    rule->set_rule_configuration_name("CPUBottleneck");
    rule->set_rule_evaluator_image("builtin");
    (*rule->mutable_rule_parameters())["rule_to_invoke"] = "CPUBottleneck";
    v1::CreateTrainingJobResponse response;
    absl::Notification done;
    absl::Status result;
    app_->manager().CreateTrainingJob(request, &response, [&](absl::Status status) {
      result = status;
      done.Notify();
    });
    done.WaitForNotification();
    ASSERT_TRUE(result.ok()) << result;
  }

  // As the agent reports the training command's exit: the profiler rules
  // conclude.
  void CompleteTraining() {
    v1::ReportTrainingStatusRequest request;
    request.set_training_job_name("job");
    request.set_event(v1::ReportTrainingStatusRequest::EVENT_COMPLETED);
    v1::ReportTrainingStatusResponse response;
    absl::Notification done;
    absl::Status result;
    app_->manager().ReportTrainingStatus(request, &response, [&](absl::Status status) {
      result = status;
      done.Notify();
    });
    done.WaitForNotification();
    ASSERT_TRUE(result.ok()) << result;
  }

  // kSamples plausible lines of two CPUs, then the `extreme` lines.
  void WriteSystemMetrics(const std::vector<std::string>& extreme_timestamps) {
    const fs::path hour =
        profiler_ / "system/incremental" /
        absl::FormatTime("%Y%m%d%H", absl::FromUnixSeconds(kDataStart), absl::UTCTimeZone());
    fs::create_directories(hour);
    std::ofstream out(hour / absl::StrCat(static_cast<int64_t>(kDataStart), ".algo-1.json"));
    auto line = [&](const std::string& cpu, const std::string& timestamp) {
      out << "{\"Type\": \"cpu\", \"Name\": \"" << cpu
          << "\", \"Dimension\": \"CPUUtilization\", \"Value\": 50, \"NodeId\": \"algo-1\", "
             "\"Timestamp\": "
          << timestamp << "}\n";
    };
    for (int i = 0; i < kSamples; ++i) {
      for (const char* cpu : {"cpu0", "cpu1"}) line(cpu, absl::StrFormat("%.1f", kDataStart + i));
    }
    for (const std::string& t : extreme_timestamps) line("cpu0", t);
  }

  // A framework trace of ten 100 ms steps from kDataStart, then `extra`
  // complete events (JSON objects without the trailing comma).
  void WriteFrameworkTrace(const std::vector<std::string>& extra) {
    const int64_t start_us = static_cast<int64_t>(kDataStart) * 1000000;
    const fs::path hour =
        profiler_ / "framework/pevents" /
        absl::FormatTime("%Y%m%d%H", absl::FromUnixSeconds(kDataStart), absl::UTCTimeZone());
    fs::create_directories(hour);
    std::ofstream out(hour / absl::StrCat(start_us + 2000000, "_11570-algo-1_pythontimeline.json"));
    out << "[\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": "
           "{\"start_time_since_epoch_in_micros\": "
        << start_us << "}},\n";
    out << "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": "
           "\"Step:ModeKeys.TRAIN\"}},\n";
    for (int step = 0; step < 10; ++step) {
      out << "{\"name\": \"Step:ModeKeys.TRAIN\", \"pid\": 1, \"ph\": \"X\", \"ts\": "
          << step * 100000 << ", \"dur\": 90000, \"args\": {\"step_num\": \"" << step << "\"}},\n";
    }
    for (const std::string& e : extra) out << e << ",\n";
    out << "{\"name\": \"last\", \"pid\": 0, \"ph\": \"X\", \"ts\": 1000000, \"dur\": 1}\n]\n";
  }

  DashboardReply Get(const std::string& path) const {
    return CallDashboard("GET", absl::StrCat("http://127.0.0.1:", app_->http_port(), path));
  }

  // The job's system series, once the store has read the plausible samples.
  json SystemWhenRead() const {
    json body;
    EXPECT_TRUE(testing::WaitUntil([&] {
      const DashboardReply r = Get("/api/jobs/job/system?width=100");
      EXPECT_EQ(r.status, 200) << r.body << r.error;
      body = r.Json();
      return r.status == 200 && !body["series"].empty();
    })) << body.dump();
    return body;
  }

  void ExpectServing() const {
    const DashboardReply r = Get("/api/jobs");
    EXPECT_EQ(r.status, 200) << r.error;
  }

  ScopedTempDir dir_;
  fs::path profiler_;
  std::unique_ptr<ServerApp> app_;
};

TEST_F(HostileRangesTest, RangesOutsideTimeAre400NamingTheParameter) {
  CreateJob();
  struct Case {
    std::string path;
    std::string field;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"/api/jobs/job/framework?start=0&end=1e300", "end", "end must be"},
      {"/api/jobs/job/system?start=0&end=1e18", "end", "end must be"},
      {"/api/jobs/job/system?end=1e300", "end", "end must be"},
      {"/api/jobs/job/system?start=-1e300&end=1e300", "start", "start must be"},
      {"/api/jobs/job/framework?start=-1", "start", "start must be"},
      {"/api/jobs/job/system?start=nan", "start", "start must be"},
      {"/api/jobs/job/system?end=inf", "end", "end must be"},
      {"/api/jobs/job/framework?start=1e300", "start", "start must be"},
      {"/api/jobs/job/system?start=1700000100&end=1700000000", "start", "start after end"},
      {"/api/jobs/job/framework?start=1700000000&end=1700000000", "start", "start equals end"},
      {"/api/jobs/job/system?width=99999999999999999999", "width", "width must be 1..4000"},
      {"/api/jobs/job/system?width=-1", "width", "width must be 1..4000"},
  };
  for (const Case& c : cases) {
    const DashboardReply r = Get(c.path);
    EXPECT_EQ(r.status, 400) << c.path << ": " << r.body << r.error;
    const json body = r.Json();
    EXPECT_EQ(body.value("field", ""), c.field) << c.path << ": " << r.body;
    EXPECT_THAT(body.value("error", ""), HasSubstr(c.message)) << c.path;
  }
  ExpectServing();
}

TEST_F(HostileRangesTest, ARangeWiderThanTheDataIsNarrowedToIt) {
  WriteSystemMetrics({});
  WriteFrameworkTrace({});
  CreateJob();
  SystemWhenRead();
  for (const char* route : {"system", "framework"}) {
    // The widest range accepted (the epoch to 2286): the data's own span.
    const DashboardReply r =
        Get(absl::StrCat("/api/jobs/job/", route, "?start=0&end=9999999999&width=4000"));
    ASSERT_EQ(r.status, 200) << route << ": " << r.body << r.error;
    const json body = r.Json();
    EXPECT_GE(body["start"].get<double>(), kDataStart) << route;
    EXPECT_LE(body["end"].get<double>(), kDataStart + kSamples) << route;
    EXPECT_LE(body["bucketSeconds"].get<double>(), 1.0) << route;
  }
  const json system = Get("/api/jobs/job/system?start=0&end=9999999999&width=4000").Json();
  for (const json& s : system["series"]) {
    ASSERT_FALSE(s["t"].empty());
    EXPECT_LE(s["t"].size(), 4000u);
    EXPECT_GE(s["t"].front().get<double>(), kDataStart - 1);
    EXPECT_LE(s["t"].back().get<double>(), kDataStart + kSamples);
  }
}

TEST_F(HostileRangesTest, ExtremeTimestampsAreSkippedAndSaidAlsoAfterARestart) {
  WriteSystemMetrics({"1e300", "0", "-5", "1e18", "946684799",
                      absl::StrFormat("%.1f", kDataStart - 40 * 86400), "NaN"});
  WriteFrameworkTrace({
      // Far beyond the rest of the job (the reader admits up to 2^53 us).
      "{\"name\": \"future\", \"pid\": 0, \"ph\": \"X\", \"ts\": 9000000000000000, \"dur\": 5}",
      // A duration of 285 years.
      "{\"name\": \"forever\", \"pid\": 0, \"ph\": \"X\", \"ts\": 5, \"dur\": 9000000000000000}",
  });
  CreateJob();
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE(run == 0 ? "first start" : "after a restart");
    const json system = SystemWhenRead();
    EXPECT_GE(system["start"].get<double>(), kDataStart);
    EXPECT_LE(system["end"].get<double>(), kDataStart + kSamples);
    for (const json& s : system["series"]) {
      EXPECT_GE(s["t"].front().get<double>(), kDataStart - 1);
      EXPECT_LE(s["t"].back().get<double>(), kDataStart + kSamples);
    }
    const std::string problems = system["problems"].dump();
    // Six implausible times (NaN is a malformed line of the reader).
    EXPECT_THAT(problems, HasSubstr("6 system metric samples")) << problems;
    EXPECT_THAT(problems, HasSubstr("2 framework events")) << problems;

    const DashboardReply framework = Get("/api/jobs/job/framework?width=100");
    ASSERT_EQ(framework.status, 200) << framework.body << framework.error;
    EXPECT_LE(framework.Json()["end"].get<double>(), kDataStart + kSamples);

    const DashboardReply overview = Get("/api/jobs/job/overview");
    ASSERT_EQ(overview.status, 200) << overview.body << overview.error;
    const json summary = overview.Json()["summary"];
    ASSERT_TRUE(summary["durationSeconds"].is_number()) << overview.body;
    EXPECT_LE(summary["durationSeconds"].get<double>(), kSamples) << overview.body;
    EXPECT_GE(summary["start"].get<double>(), kDataStart) << overview.body;
    ExpectServing();

    if (run == 0) {
      // The profiler rule concludes on what was kept and says what was not.
      CompleteTraining();
      std::string details;
      EXPECT_TRUE(testing::WaitUntil(
          [&] {
            const json job = Get("/api/jobs/job").Json();
            for (const json& s : job.value("ProfilerRuleEvaluationStatuses", json::array())) {
              if (s.value("RuleEvaluationStatus", "") == "InProgress") continue;
              details = s.value("StatusDetails", "");
              return true;
            }
            return false;
          },
          absl::Seconds(60)));
      EXPECT_THAT(details, HasSubstr("6 system metric samples")) << details;
    }
    app_.reset();
    StartServer();
  }
}

}  // namespace
}  // namespace debugplane::service
