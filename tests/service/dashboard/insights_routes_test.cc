// The dashboard's data routes (service/dashboard/insights_routes.h) over a
// real job manager, InsightsStore and TensorQueryHandler, on the fixtures
// of tests/data (profiler output and an smdebug trial), called as the
// router calls them, with a responder that keeps the reply.

#include "service/dashboard/insights_routes.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <zlib.h>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "service/dashboard/gzip_reply.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/core/test_util.h"

namespace debugplane::service::dashboard {
namespace {

namespace fs = std::filesystem;
using ::debugplane::testing::ScopedTempDir;
using nlohmann::json;
using ::testing::HasSubstr;

constexpr char kLoss[] = "CrossEntropyLoss_output_0";

class KeptResponse : public http::HttpResponder {
 public:
  struct Shared {
    absl::Notification done;
    http::HttpResponse response;
  };
  explicit KeptResponse(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}
  void Respond(http::HttpResponse response) override {
    if (shared_->done.HasBeenNotified()) return;
    shared_->response = std::move(response);
    shared_->done.Notify();
  }

 private:
  std::shared_ptr<Shared> shared_;
};

struct Reply {
  int status = 0;
  json body;
  std::string raw;            // Decompressed when the reply was gzipped.
  std::string encoding;       // Content-Encoding, "" if none.
  size_t wire_bytes = 0;      // The body as sent.
};

// The gzip stream `data` inflated; "" with a test failure if it is not one.
std::string Gunzip(const std::string& data) {
  z_stream stream{};
  EXPECT_EQ(inflateInit2(&stream, 15 + 16), Z_OK);
  std::string out;
  char buffer[1 << 16];
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  int result = Z_OK;
  while (result == Z_OK) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof(buffer);
    result = inflate(&stream, Z_NO_FLUSH);
    out.append(buffer, sizeof(buffer) - stream.avail_out);
  }
  inflateEnd(&stream);
  EXPECT_EQ(result, Z_STREAM_END) << "not a complete gzip stream";
  return out;
}

class InsightsRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path data = DP_TEST_DATA_DIR;
    fs::copy(data / "profiler/system/healthy", dir_.path() / "profiler",
             fs::copy_options::recursive);
    fs::copy(data / "profiler/framework/pytorch-step-outlier", dir_.path() / "profiler",
             fs::copy_options::recursive | fs::copy_options::skip_existing);
    fs::copy(data / "smdebug/overfit", dir_.path() / "overfit", fs::copy_options::recursive);
    auto manager = debugplane::testing::OpenTestManager(dir_.path());
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *std::move(manager);
    CreateJob("job", dir_.path() / "profiler");

    rules_engine::insights::InsightsStoreOptions options;
    options.data_roots = {dir_.path()};
    options.first_read_wait = absl::Seconds(60);  // Loaded machines: the fixtures whole.
    store_ = std::make_unique<rules_engine::insights::InsightsStore>(manager_.get(), options);
    rules_engine::TensorQueryOptions tensor_options;
    tensor_options.data_roots = {dir_.path()};
    tensors_ = std::make_unique<rules_engine::TensorQueryHandler>(manager_.get(), tensor_options);
    resources_ = InsightsResources({store_.get(), tensors_.get()});
  }
  void TearDown() override {
    if (store_) store_->Shutdown();
    tensors_.reset();
    if (manager_) manager_->Shutdown();
  }

  void CreateJob(const std::string& name, const fs::path& profiler) {
    v1::CreateTrainingJobRequest request;
    request.set_training_job_name(name);
    request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Test");
    request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
    request.mutable_debug_hook_config()->set_s3_output_path((dir_.path() / "overfit").string());
    request.mutable_profiler_config()->set_s3_output_path(profiler.string());
    auto* debug = request.add_debug_rule_configurations();
    debug->set_rule_configuration_name("LossNotDecreasing");
    debug->set_rule_evaluator_image("builtin");
    (*debug->mutable_rule_parameters())["rule_to_invoke"] = "LossNotDecreasing";
    (*debug->mutable_rule_parameters())["num_steps"] = "5";
    auto* profiler_rule = request.add_profiler_rule_configurations();
    profiler_rule->set_rule_configuration_name("CPUBottleneck");
    profiler_rule->set_rule_evaluator_image("builtin");
    (*profiler_rule->mutable_rule_parameters())["rule_to_invoke"] = "CPUBottleneck";
    auto created = debugplane::testing::CallSync<v1::CreateTrainingJobResponse>(
        *manager_, &core::TrainingJobHandler::CreateTrainingJob, request);
    ASSERT_TRUE(created.ok()) << created.status();
  }

  void SetRuleStatus(const std::string& rule, v1::RuleEvaluationStatus::Value status,
                     const std::string& details) {
    absl::Notification done;
    manager_->SetRuleEvaluationStatus("job", rule, status, details, [&](absl::Status s) {
      EXPECT_TRUE(s.ok()) << s;
      done.Notify();
    });
    done.WaitForNotification();
  }

  Reply Get(const std::string& resource, const std::string& query, const std::string& job = "job",
            const std::string& accept_encoding = "") {
    for (const JobResource& r : resources_) {
      if (r.resource != resource) continue;
      EXPECT_EQ(r.method, "GET");
      auto shared = std::make_shared<KeptResponse::Shared>();
      http::HttpRequest request;
      request.method = "GET";
      request.path = "/api/jobs/" + job + "/" + resource;
      request.query = query;
      if (!accept_encoding.empty()) request.headers.emplace_back("Accept-Encoding", accept_encoding);
      r.handler(std::move(request), job, auth::Principal{}, std::make_unique<KeptResponse>(shared));
      EXPECT_TRUE(shared->done.WaitForNotificationWithTimeout(absl::Seconds(60)));
      Reply reply;
      reply.status = shared->response.status;
      reply.raw = shared->response.body;
      reply.wire_bytes = reply.raw.size();
      for (const auto& [name, value] : shared->response.headers) {
        if (name == "Content-Encoding") reply.encoding = value;
      }
      if (reply.encoding == "gzip") reply.raw = Gunzip(reply.raw);
      reply.body = json::parse(reply.raw, nullptr, /*allow_exceptions=*/false);
      EXPECT_FALSE(reply.body.is_discarded()) << reply.raw;
      bool json_type = false;
      for (const auto& [name, value] : shared->response.headers) {
        json_type = json_type ||
                    (name == "Content-Type" && absl::StartsWith(value, "application/json"));
      }
      EXPECT_TRUE(json_type);
      return reply;
    }
    ADD_FAILURE() << "no resource " << resource;
    return {};
  }

  ScopedTempDir dir_;
  std::unique_ptr<core::TrainingJobManager> manager_;
  std::unique_ptr<rules_engine::insights::InsightsStore> store_;
  std::unique_ptr<rules_engine::TensorQueryHandler> tensors_;
  std::vector<JobResource> resources_;
};

TEST_F(InsightsRoutesTest, ResourcesAreTheFiveDataRoutes) {
  std::vector<std::string> names;
  for (const JobResource& r : resources_) names.push_back(r.resource);
  EXPECT_THAT(names,
              ::testing::ElementsAre("overview", "system", "framework", "tensors", "tensor"));
  EXPECT_EQ(resources_[3].action, auth::Action::kQueryTensors);
  EXPECT_EQ(resources_[0].action, auth::Action::kDescribeTrainingJob);
}

TEST_F(InsightsRoutesTest, OverviewOnTheFixtures) {
  SetRuleStatus("LossNotDecreasing", v1::RuleEvaluationStatus::IssuesFound,
                "step 40 (TRAIN step 30): CrossEntropyLoss_output_0 0.6931 decreased by 0.1% "
                "since 0.6938 at TRAIN step 25, less than diff_percent 0.1 in 5 steps");
  const Reply r = Get("overview", "");
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& summary = r.body["summary"];
  ASSERT_TRUE(summary["start"].is_number()) << r.raw;
  EXPECT_TRUE(summary["end"].is_null());  // Still InProgress.
  ASSERT_EQ(summary["phases"].size(), 2u);
  EXPECT_EQ(summary["phases"][0]["name"], "initialization");
  EXPECT_EQ(summary["phases"][1]["name"], "training_loop");
  EXPECT_GT(summary["durationSeconds"].get<double>(), 0);

  // algo-1 of the healthy fixture: cpu, gpu, gpu_memory, cpu_memory, io_wait.
  std::set<std::string> metrics;
  for (const json& u : r.body["utilization"]) {
    EXPECT_EQ(u["node"], "algo-1");
    EXPECT_EQ(u["unit"], "percent");
    metrics.insert(u["metric"].get<std::string>());
    EXPECT_LE(u["min"].get<double>(), u["p50"].get<double>());
    EXPECT_LE(u["p50"].get<double>(), u["p90"].get<double>());
    EXPECT_LE(u["p90"].get<double>(), u["p99"].get<double>());
    EXPECT_LE(u["p99"].get<double>(), u["max"].get<double>());
  }
  EXPECT_EQ(metrics, (std::set<std::string>{"cpu", "gpu", "gpu_memory", "cpu_memory", "io_wait"}));

  ASSERT_FALSE(r.body["operations"].empty());
  EXPECT_LE(r.body["operations"].size(), 20u);
  EXPECT_TRUE(r.body["operations"][0]["totalSeconds"].is_number());

  const json& insights = r.body["insights"];
  ASSERT_EQ(insights.size(), 2u);
  EXPECT_EQ(insights[0]["rule"], "LossNotDecreasing");
  EXPECT_EQ(insights[0]["kind"], "debug");
  EXPECT_EQ(insights[0]["status"], "IssuesFound");
  EXPECT_THAT(insights[0]["checks"].get<std::string>(), HasSubstr("loss"));
  EXPECT_FALSE(insights[0]["suggestion"].get<std::string>().empty());
  EXPECT_EQ(insights[0]["parameters"]["num_steps"], "5");           // Given.
  EXPECT_TRUE(insights[0]["parameters"].contains("diff_percent"));  // Default merged.
  EXPECT_EQ(insights[0]["found"]["step"], 40);
  EXPECT_EQ(insights[0]["found"]["tensor"], kLoss);
  EXPECT_DOUBLE_EQ(insights[0]["found"]["value"].get<double>(), 0.6931);
  EXPECT_EQ(insights[1]["rule"], "CPUBottleneck");
  EXPECT_EQ(insights[1]["kind"], "profiler");
  EXPECT_EQ(insights[1]["status"], "InProgress");
  EXPECT_TRUE(insights[1]["found"].is_null());
  EXPECT_TRUE(insights[1]["parameters"].contains("threshold"));
  EXPECT_TRUE(r.body["problems"].empty()) << r.raw;
}

TEST_F(InsightsRoutesTest, SystemSeriesAndTheHeatmap) {
  Reply r = Get("system", "width=100");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["nodes"], json({"algo-1"}));
  ASSERT_FALSE(r.body["series"].empty());
  for (const json& s : r.body["series"]) {
    EXPECT_LE(s["t"].size(), 100u);
    EXPECT_EQ(s["t"].size(), s["min"].size());
    EXPECT_EQ(s["t"].size(), s["mean"].size());
  }
  const double start = r.body["start"], end = r.body["end"];
  EXPECT_LT(start, end);
  const double bucket = r.body["bucketSeconds"];
  EXPECT_GE(bucket * 100, end - start - bucket);

  r = Get("system", "metric=cpu&node=algo-1&width=20");
  ASSERT_EQ(r.status, 200) << r.raw;
  std::vector<std::string> devices;
  for (const json& s : r.body["series"]) devices.push_back(s["device"]);
  EXPECT_EQ(devices, (std::vector<std::string>{"total", "cpu0", "cpu1", "cpu2", "cpu3"}));

  // Past the data: every bucket null.
  r = Get("system", "metric=gpu&devices=gpu0&start=" + std::to_string(end + 100) +
                        "&end=" + std::to_string(end + 200) + "&width=10");
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_EQ(r.body["series"].size(), 1u);
  for (const json& v : r.body["series"][0]["mean"]) EXPECT_TRUE(v.is_null());
}

// fields=mean: each series only its means, the bucket starts once at the
// top; the same means as the full reply's, in a fraction of the bytes.
TEST_F(InsightsRoutesTest, SystemFieldsNameTheArraysEachSeriesCarries) {
  const Reply full = Get("system", "width=100");
  const Reply means = Get("system", "width=100&fields=mean");
  ASSERT_EQ(full.status, 200) << full.raw;
  ASSERT_EQ(means.status, 200) << means.raw;
  ASSERT_EQ(full.body["series"].size(), means.body["series"].size());
  ASSERT_FALSE(means.body["t"].empty());
  EXPECT_EQ(full.body["t"], means.body["t"]);
  for (size_t i = 0; i < full.body["series"].size(); ++i) {
    const json& f = full.body["series"][i];
    const json& m = means.body["series"][i];
    EXPECT_EQ(f["t"], means.body["t"]);
    EXPECT_EQ(m["device"], f["device"]);
    EXPECT_EQ(m["mean"], f["mean"]);
    EXPECT_FALSE(m.contains("t"));
    EXPECT_FALSE(m.contains("min"));
    EXPECT_FALSE(m.contains("max"));
  }
  EXPECT_LT(means.raw.size() * 2, full.raw.size());
  const Reply two = Get("system", "width=10&fields=max,%20t");
  ASSERT_EQ(two.status, 200) << two.raw;
  EXPECT_TRUE(two.body["series"][0].contains("t"));
  EXPECT_TRUE(two.body["series"][0].contains("max"));
  EXPECT_FALSE(two.body["series"][0].contains("mean"));

  for (const char* bad : {"fields=median", "fields=", "fields=,", "fields=mean,p99"}) {
    const Reply r = Get("system", bad);
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_EQ(r.body["field"], "fields") << bad;
    EXPECT_THAT(r.body["error"].get<std::string>(), HasSubstr("fields must")) << bad;
  }
}

// A large reply is gzipped when the request accepts it, and only then.
TEST_F(InsightsRoutesTest, LargeRepliesAreGzippedWhenAccepted) {
  const Reply plain = Get("system", "width=200");
  const Reply gzipped = Get("system", "width=200", "job", "gzip, deflate, br");
  const Reply refused = Get("system", "width=200", "job", "gzip;q=0, identity");
  ASSERT_EQ(plain.status, 200);
  ASSERT_GT(plain.raw.size(), kMinGzipBytes);
  EXPECT_EQ(plain.encoding, "");
  EXPECT_EQ(refused.encoding, "");
  EXPECT_EQ(gzipped.encoding, "gzip");
  EXPECT_EQ(gzipped.raw, plain.raw);
  EXPECT_LT(gzipped.wire_bytes * 3, plain.raw.size());
  // Small replies are not worth it.
  const Reply small = Get("system", "width=1&metric=gpu&devices=gpu0", "job", "gzip");
  ASSERT_EQ(small.status, 200);
  EXPECT_LT(small.raw.size(), kMinGzipBytes);
  EXPECT_EQ(small.encoding, "");
}

TEST_F(InsightsRoutesTest, FrameworkPhasesAndSteps) {
  const Reply r = Get("framework", "width=50");
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_EQ(r.body["phases"].size(), 5u);
  EXPECT_EQ(r.body["phases"][0]["phase"], "step");
  bool busy = false;
  for (const json& p : r.body["phases"]) {
    for (const json& b : p["busy"]) {
      EXPECT_GE(b.get<double>(), 0);
      EXPECT_LE(b.get<double>(), 1);
      busy = busy || b.get<double>() > 0;
    }
  }
  EXPECT_TRUE(busy);
  ASSERT_FALSE(r.body["steps"].empty());
  EXPECT_LE(r.body["steps"].size(), 200u);
  EXPECT_GT(r.body["steps"][0]["seconds"].get<double>(), 0);
}

TEST_F(InsightsRoutesTest, QueryErrorsNameTheParameter) {
  Reply r = Get("system", "width=0");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body["error"].get<std::string>(), HasSubstr("width must be 1..4000"));
  EXPECT_EQ(r.body["field"], "width");
  r = Get("system", "width=4001");
  EXPECT_EQ(r.status, 400);
  r = Get("framework", "start=20&end=10");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body["error"].get<std::string>(), HasSubstr("start after end"));
  EXPECT_EQ(r.body["field"], "start");
  r = Get("system", "start=yesterday");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["field"], "start");
  r = Get("system", "metric=disk");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["field"], "metric");
  r = Get("system", "colour=red");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body["error"].get<std::string>(), HasSubstr("unknown query parameter 'colour'"));
  r = Get("tensor", "");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["field"], "name");
  r = Get("tensor", "name=x&steps=9:3");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["field"], "steps");
  r = Get("overview", "", "no-such-job");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body["error"], "training job 'no-such-job' does not exist");
}

TEST_F(InsightsRoutesTest, CorruptMetricsFileIsNamed) {
  const fs::path hour = dir_.path() / "profiler/system/incremental/2026112122";
  std::ofstream(hour / "1795309999.algo-1.json")
      << "{\"Type\": \"cpu\", \"Name\": \"cpu0\", \"Dimension\": \"CPUUtilization\", "
         "\"Value\": 5, \"NodeId\": \"algo-1\", \"Timestamp\": 1795309999.0}\n"
         "this is not json\n";
  ASSERT_TRUE(store_->RefreshNow("job").ok());  // The background may have read before.
  const Reply r = Get("system", "width=10");
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_FALSE(r.body["problems"].empty()) << r.raw;
  EXPECT_THAT(r.body["problems"][0].get<std::string>(),
              HasSubstr("system/incremental/2026112122/1795309999.algo-1.json:2"));
}

TEST_F(InsightsRoutesTest, JobWithoutProfilerOutputSaysWhy) {
  const fs::path empty = dir_.path() / "nothing-yet";
  fs::create_directories(empty);
  CreateJob("quiet", empty);
  const Reply r = Get("overview", "", "quiet");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_TRUE(r.body["summary"]["start"].is_null());
  EXPECT_TRUE(r.body["utilization"].empty());
  EXPECT_EQ(r.body["insights"].size(), 2u);
}

TEST_F(InsightsRoutesTest, TensorsAndOneTensorPerMode) {
  Reply r = Get("tensors", "");
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_EQ(r.body["tensors"].size(), 1u);
  const json& t = r.body["tensors"][0];
  EXPECT_EQ(t["name"], kLoss);
  ASSERT_TRUE(t["steps"].contains("TRAIN")) << r.raw;
  ASSERT_TRUE(t["steps"].contains("EVAL")) << r.raw;
  EXPECT_EQ(t["steps"]["TRAIN"].size(), 3u);

  r = Get("tensor", std::string("name=") + kLoss);
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_EQ(r.body["series"].size(), 2u) << r.raw;
  size_t points = 0;
  for (const json& s : r.body["series"]) {
    EXPECT_TRUE(s["scalar"].get<bool>());
    EXPECT_EQ(s["steps"].size(), s["value"].size());
    points += s["steps"].size();
  }
  EXPECT_EQ(points, 220u);  // Every step of the fixture.
  EXPECT_EQ(r.body["series"][0]["mode"], "TRAIN");
  EXPECT_EQ(r.body["series"][1]["mode"], "EVAL");

  r = Get("tensor", std::string("name=") + kLoss + "&mode=EVAL&maxPoints=5");
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_EQ(r.body["series"].size(), 1u);
  EXPECT_LE(r.body["series"][0]["steps"].size(), 5u);

  r = Get("tensor", "name=no_such_tensor");
  EXPECT_EQ(r.status, 404) << r.raw;
  EXPECT_THAT(r.body["error"].get<std::string>(), HasSubstr("no_such_tensor"));
}

// A PyTorch profiler trace is the framework view (tests/data/frameworks:
// the data-loader-bound run): the Nodes view's phases have data loading
// busiest and its six steps; the Overview's top operation is the loader.
TEST_F(InsightsRoutesTest, PyTorchTraceFillsTheFrameworkViewAndTopOperations) {
  fs::copy(fs::path(DP_TEST_DATA_DIR) / "frameworks/pytorch-dataloader-trace",
           dir_.path() / "loader", fs::copy_options::recursive);
  CreateJob("loader", dir_.path() / "loader");
  Reply r = Get("framework", "width=50", "loader");
  ASSERT_EQ(r.status, 200) << r.raw;
  std::map<std::string, double> busy;
  for (const json& p : r.body["phases"]) {
    for (const json& b : p["busy"]) {
      if (b.is_number()) busy[p["phase"].get<std::string>()] += b.get<double>();
    }
  }
  EXPECT_GT(busy["dataloader"], 0) << r.raw;
  for (const char* phase : {"forward", "backward", "other"}) {
    EXPECT_LT(busy[phase], busy["dataloader"] / 5) << phase << " " << r.raw;
  }
  ASSERT_EQ(r.body["steps"].size(), 6u) << r.raw;
  EXPECT_NEAR(r.body["steps"][0]["seconds"].get<double>(), 0.072, 0.02);

  r = Get("overview", "", "loader");
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_FALSE(r.body["operations"].empty()) << r.raw;
  EXPECT_EQ(r.body["operations"][0]["name"],
            "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
  EXPECT_EQ(r.body["operations"][0]["phase"], "dataloader");
}

}  // namespace
}  // namespace debugplane::service::dashboard
