#include "rules_engine/insights/job_insights.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "objectstore/local_object_store.h"
#include "rules_engine/profiler/framework_timeline_reader.h"
#include "rules_engine/profiler/system_metrics_reader.h"
#include "tests/support/scoped_temp_dir.h"

namespace debugplane::rules_engine::insights {
namespace {

using ::debugplane::testing::ScopedTempDir;

objectstore::StoreLocation Local(const std::filesystem::path& path) {
  absl::StatusOr<objectstore::StoreLocation> location = objectstore::OpenLocalPath(path.string());
  EXPECT_TRUE(location.ok()) << location.status();
  return *std::move(location);
}

// smdebug's system metric lines for one sample time of node `node`: 4
// cores, 2 GPUs (utilization and memory), memory and I/O wait.
std::string SampleLines(std::mt19937_64& rng, double t, const std::string& node) {
  std::uniform_real_distribution<double> v(0, 100);
  std::string out;
  auto line = [&](const char* type, const std::string& name, const char* dim) {
    absl::StrAppend(&out, "{\"Type\": \"", type, "\", \"Name\": \"", name, "\", \"Dimension\": \"",
                    dim, "\", \"Value\": ", absl::StrFormat("%.2f", v(rng)), ", \"NodeId\": \"",
                    node, "\", \"Timestamp\": ", absl::StrFormat("%.3f", t), "}\n");
  };
  for (int c = 0; c < 4; ++c) line("cpu", absl::StrCat("cpu", c), "CPUUtilization");
  for (int g = 0; g < 2; ++g) {
    line("gpu", absl::StrCat("gpu", g), "GPUUtilization");
    line("gpu", absl::StrCat("gpu", g), "GPUMemoryUtilization");
  }
  line("cpu", "cpu", "MemoryUsedPercent");
  line("cpu", "cpu", "I/OWaitPercentage");
  return out;
}

// Minutes of 100 ms samples for two nodes, one file per node and minute.
struct MetricFiles {
  std::vector<std::pair<std::filesystem::path, std::string>> files;
};
MetricFiles MakeFiles(const std::filesystem::path& profiler, double start, int minutes) {
  std::mt19937_64 rng(11);
  MetricFiles out;
  for (int m = 0; m < minutes; ++m) {
    for (const std::string node : {"algo-1", "algo-2"}) {
      const double t0 = start + 60 * m;
      std::string content;
      for (int i = 0; i < 600; ++i) content += SampleLines(rng, t0 + i * 0.1, node);
      out.files.emplace_back(profiler / "system" / "incremental" / "2026112122" /
                                 absl::StrCat(static_cast<int64_t>(t0), ".", node, ".json"),
                             std::move(content));
    }
  }
  return out;
}

void Write(const std::filesystem::path& path, const std::string& content, bool append) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream f(path, append ? std::ios::app : std::ios::trunc);
  f << content;
}

void ExpectSameSeries(const SystemSeries& a, const SystemSeries& b) {
  ASSERT_EQ(a.series.size(), b.series.size());
  EXPECT_EQ(a.buckets.level, b.buckets.level);
  EXPECT_EQ(a.buckets.first, b.buckets.first);
  for (size_t i = 0; i < a.series.size(); ++i) {
    ASSERT_EQ(a.series[i].cells.size(), b.series[i].cells.size());
    for (size_t j = 0; j < a.series[i].cells.size(); ++j) {
      const SampleCell& x = a.series[i].cells[j];
      const SampleCell& y = b.series[i].cells[j];
      ASSERT_EQ(x.count, y.count) << i << " " << j;
      EXPECT_EQ(x.min, y.min);
      EXPECT_EQ(x.max, y.max);
      EXPECT_NEAR(x.sum, y.sum, 1e-3 * (1 + std::fabs(x.sum)));
    }
  }
}

TEST(JobInsightsTest, IncrementalIngestEqualsOneShot) {
  ScopedTempDir dir;
  const std::filesystem::path profiler = dir.path() / "profiler";
  const double start = 1795300000.0;
  const MetricFiles files = MakeFiles(profiler, start, 6);

  // Incremental: each file appears in two parts cut mid-line, read after each.
  JobInsights incremental;
  SystemMetricsReader reader(Local(profiler));
  for (const auto& [path, content] : files.files) {
    const size_t cut = content.size() / 2 + 17;
    Write(path, content.substr(0, cut), false);
    incremental.AddMetrics(reader.ReadNew());
    Write(path, content.substr(cut), true);
    incremental.AddMetrics(reader.ReadNew(/*max_bytes=*/4096));
    while (reader.more_pending()) incremental.AddMetrics(reader.ReadNew(4096));
  }
  EXPECT_EQ(reader.malformed_lines(), 0);

  JobInsights one_shot;
  SystemMetricsReader whole(Local(profiler));
  one_shot.AddMetrics(whole.ReadNew());
  EXPECT_EQ(one_shot.metric_points(), incremental.metric_points());
  EXPECT_EQ(one_shot.metric_points(), 6 * 2 * 600 * 10);

  for (int width : {1, 37, 800, 4000}) {
    SystemQuery q;
    q.width = width;
    ExpectSameSeries(incremental.QuerySystem(q), one_shot.QuerySystem(q));
  }
  SystemQuery zoom;
  zoom.range = {start + 100, start + 130};
  zoom.width = 300;
  ExpectSameSeries(incremental.QuerySystem(zoom), one_shot.QuerySystem(zoom));
  const auto u1 = incremental.UtilizationSummary(), u2 = one_shot.UtilizationSummary();
  ASSERT_EQ(u1.size(), u2.size());
  for (size_t i = 0; i < u1.size(); ++i) EXPECT_EQ(u1[i].p90, u2[i].p90);
}

TEST(JobInsightsTest, SeriesFiltersOrderAndRange) {
  ScopedTempDir dir;
  const std::filesystem::path profiler = dir.path() / "profiler";
  const double start = 1795300000.0;
  for (const auto& [path, content] : MakeFiles(profiler, start, 2).files) {
    Write(path, content, false);
  }
  JobInsights data;
  SystemMetricsReader reader(Local(profiler));
  data.AddMetrics(reader.ReadNew());

  SystemQuery all;
  all.width = 100;
  SystemSeries s = data.QuerySystem(all);
  EXPECT_EQ(s.nodes, (std::vector<std::string>{"algo-1", "algo-2"}));
  EXPECT_DOUBLE_EQ(s.start, start);
  EXPECT_NEAR(s.end, start + 119.9, 1e-6);
  // Per node: cpu total + 4 cores, gpu total + 2, gpu_memory total + 2,
  // cpu_memory, io_wait.
  EXPECT_EQ(s.series.size(), 2u * (5 + 3 + 3 + 1 + 1));
  EXPECT_LE(s.buckets.output_buckets(), 100);
  EXPECT_EQ(s.series[0].key.device, "total");
  EXPECT_EQ(s.series[1].key.device, "cpu0");

  // The heatmap: every device of one metric of one node.
  SystemQuery heat;
  heat.node = "algo-2";
  heat.metric = Metric::kCpu;
  heat.width = 50;
  s = data.QuerySystem(heat);
  ASSERT_EQ(s.series.size(), 5u);
  for (const auto& series : s.series) EXPECT_EQ(series.key.node, "algo-2");
  EXPECT_EQ(s.series[4].key.device, "cpu3");

  // The total's mean is the mean over the devices (same sample counts).
  SystemQuery devices;
  devices.node = "algo-1";
  devices.metric = Metric::kGpu;
  devices.width = 10;
  s = data.QuerySystem(devices);
  ASSERT_EQ(s.series.size(), 3u);
  for (size_t j = 0; j < s.series[0].cells.size(); ++j) {
    const double total = s.series[0].cells[j].sum / s.series[0].cells[j].count;
    const double mean = (s.series[1].cells[j].sum / s.series[1].cells[j].count +
                         s.series[2].cells[j].sum / s.series[2].cells[j].count) /
                        2;
    EXPECT_NEAR(total, mean, 1e-3);
    EXPECT_EQ(s.series[0].cells[j].max,
              std::max(s.series[1].cells[j].max, s.series[2].cells[j].max));
  }

  // A narrower device list; a range past the data: empty buckets.
  devices.devices = {"gpu1"};
  devices.range = {start + 500, start + 600};
  s = data.QuerySystem(devices);
  ASSERT_EQ(s.series.size(), 1u);
  for (const SampleCell& c : s.series[0].cells) EXPECT_EQ(c.count, 0u);
}

TEST(JobInsightsTest, UtilizationPercentilesMatchNearestRank) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> value(40, 15);
  std::vector<SystemMetricPoint> points;
  std::vector<double> values;
  for (int i = 0; i < 20000; ++i) {
    SystemMetricPoint p;
    p.type = "gpu";
    p.name = absl::StrCat("gpu", i % 4);
    p.dimension = "GPUUtilization";
    p.dim = MetricDimension::kGpuUtilization;
    p.node_id = "algo-1";
    p.timestamp = 1795300000.0 + i * 0.025;
    p.value = std::clamp(value(rng), 0.0, 100.0);
    values.push_back(p.value);
    points.push_back(p);
  }
  JobInsights data;
  data.AddMetrics(points);
  const std::vector<Utilization> u = data.UtilizationSummary();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].metric, Metric::kGpu);
  std::sort(values.begin(), values.end());
  auto rank = [&](double q) {
    return values[static_cast<size_t>(std::ceil(q * values.size())) - 1];
  };
  EXPECT_DOUBLE_EQ(u[0].min, values.front());
  EXPECT_DOUBLE_EQ(u[0].max, values.back());
  EXPECT_NEAR(*u[0].p50, rank(0.5), 0.051);
  EXPECT_NEAR(*u[0].p90, rank(0.9), 0.051);
  EXPECT_NEAR(*u[0].p99, rank(0.99), 0.051);
}

TEST(JobInsightsTest, TrainingSummaryOperationsAndStepsOnTheFixture) {
  const std::filesystem::path fixture =
      std::filesystem::path(DP_TEST_DATA_DIR) / "profiler/framework/pytorch-step-outlier";
  FrameworkTimelineReader reader(Local(fixture));
  const std::vector<FrameworkEvent> events = reader.ReadNew();
  ASSERT_FALSE(events.empty());
  JobInsights data;
  data.AddFrameworkEvents(events);

  // What the summary must say, from the events directly.
  double first = 1e300, last_end = 0, first_step = 1e300, last_step_end = 0;
  int64_t steps = 0;
  for (const FrameworkEvent& e : events) {
    const double s = e.start_us / 1e6, end = (e.start_us + e.duration_us) / 1e6;
    first = std::min(first, s);
    if (e.timeline_start_us >= 0) first = std::min(first, e.timeline_start_us / 1e6);
    last_end = std::max(last_end, end);
    if (!StepEventMode(e.name).empty()) {
      ++steps;
      first_step = std::min(first_step, s);
      last_step_end = std::max(last_step_end, end);
    }
  }
  ASSERT_GT(steps, 0);
  const TrainingSummary running = data.Summary(/*ended=*/false);
  ASSERT_TRUE(running.start.has_value());
  EXPECT_FALSE(running.end.has_value());
  ASSERT_EQ(running.phases.size(), 2u);
  EXPECT_DOUBLE_EQ(*running.start, first);
  EXPECT_EQ(running.phases[0].name, "initialization");
  EXPECT_DOUBLE_EQ(running.phases[0].end, first_step);
  EXPECT_DOUBLE_EQ(running.phases[1].end, last_step_end);

  const TrainingSummary ended = data.Summary(/*ended=*/true);
  ASSERT_EQ(ended.phases.size(), 3u);
  EXPECT_EQ(ended.phases[2].name, "finalization");
  EXPECT_DOUBLE_EQ(*ended.end, last_end);
  double covered = 0;
  for (const auto& p : ended.phases) covered += p.end - p.start;
  EXPECT_NEAR(covered, *ended.end - *ended.start, 1e-6);

  const std::vector<Operation> ops = data.TopOperations();
  ASSERT_FALSE(ops.empty());
  EXPECT_LE(ops.size(), JobInsights::kTopOperations);
  double share = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (i > 0) {
      EXPECT_GE(ops[i - 1].total_seconds, ops[i].total_seconds);
    }
    EXPECT_TRUE(StepEventMode(ops[i].name).empty());
    share += ops[i].share;
  }
  EXPECT_LE(share, 1 + 1e-9);

  const FrameworkSeries f = data.QueryFramework({}, 200);
  EXPECT_EQ(static_cast<int64_t>(f.steps.size()), std::min<int64_t>(steps, 200));
  for (size_t i = 1; i < f.steps.size(); ++i) EXPECT_LE(f.steps[i - 1].start, f.steps[i].start);
  double step_busy = 0;
  for (double b : f.busy[static_cast<int>(Phase::kStep)]) step_busy += b;
  double step_time = 0;
  for (const FrameworkEvent& e : events) {
    if (!StepEventMode(e.name).empty()) step_time += e.duration_us / 1e6;
  }
  EXPECT_NEAR(step_busy, step_time, 1e-3 * step_time);
}

SystemMetricPoint CpuPoint(double t, double value) {
  SystemMetricPoint p;
  p.type = "cpu";
  p.name = "cpu0";
  p.dimension = "CPUUtilization";
  p.dim = MetricDimension::kCpuUtilization;
  p.node_id = "algo-1";
  p.timestamp = t;
  p.value = value;
  return p;
}

// Every bucket time of `buckets` is a time the data could have.
void ExpectSaneBuckets(const LevelChoice& buckets, int width) {
  EXPECT_GE(buckets.output_buckets(), 1);
  EXPECT_LE(buckets.output_buckets(), width);
  for (int64_t i = 0; i < buckets.output_buckets(); ++i) {
    EXPECT_GE(buckets.output_start(i), -1.0);
    EXPECT_LE(buckets.output_start(i), 1e10);
  }
}

TEST(JobInsightsTest, HugeNegativeAndNonFiniteRangesStayWithinWidthBuckets) {
  JobInsights data;
  data.AddMetrics({CpuPoint(1795300000, 10), CpuPoint(1795300060, 20)});
  FrameworkEvent step;
  step.name = "Step:ModeKeys.TRAIN";
  step.start_us = 1795300000000000;
  step.duration_us = 100000;
  data.AddFrameworkEvents({step});
  const double nan = std::nan("");
  const double inf = HUGE_VAL;
  const std::vector<TimeRange> ranges = {{0.0, 1e300},
                                         {-1e300, 1e300},
                                         {0.0, 1e18},
                                         {std::nullopt, 1e300},
                                         {1e300, std::nullopt},
                                         {-1e300, std::nullopt},
                                         {nan, nan},
                                         {-inf, inf},
                                         {1e18, 0.0},
                                         {5.0, -5.0},
                                         {1795300030.0, 1795300030.0}};
  for (const TimeRange& range : ranges) {
    SCOPED_TRACE(absl::StrCat(range.start.value_or(-1), " .. ", range.end.value_or(-1)));
    const FrameworkSeries f = data.QueryFramework(range, 800);
    ExpectSaneBuckets(f.buckets, 800);
    for (const std::vector<double>& busy : f.busy) {
      EXPECT_EQ(busy.size(), static_cast<size_t>(f.buckets.output_buckets()));
    }
    SystemQuery query;
    query.range = range;
    query.width = 4000;
    const SystemSeries s = data.QuerySystem(query);
    ExpectSaneBuckets(s.buckets, 4000);
    ASSERT_FALSE(s.series.empty());
    EXPECT_EQ(s.series[0].cells.size(), static_cast<size_t>(s.buckets.output_buckets()));
  }
}

TEST(JobInsightsTest, ARangeReachingPastTheDataIsNarrowedToIt) {
  JobInsights data;
  data.AddMetrics({CpuPoint(1795300000, 10), CpuPoint(1795300060, 20)});
  SystemQuery query;
  query.range = {0.0, 9999999999.0};
  query.width = 60;
  const SystemSeries s = data.QuerySystem(query);
  EXPECT_EQ(s.start, 1795300000);
  EXPECT_EQ(s.end, 1795300060);
  EXPECT_LE(s.buckets.bucket_seconds(), 2);
  // Beside the data: as asked, every bucket empty.
  query.range = {1795400000.0, 1795400100.0};
  const SystemSeries beside = data.QuerySystem(query);
  EXPECT_EQ(beside.start, 1795400000);
  for (const SampleCell& c : beside.series[0].cells) EXPECT_EQ(c.count, 0u);
}

TEST(JobInsightsTest, ManySeriesAtFullWidthStayWithinTheCellBudget) {
  // 600 devices of one node: at 4000 buckets, 2.4M cells; the budget is 1M.
  JobInsights data;
  std::vector<SystemMetricPoint> points;
  for (int device = 0; device < 600; ++device) {
    for (int i = 0; i < 2; ++i) {
      SystemMetricPoint p = CpuPoint(1795300000 + i * 3600, 50);
      p.name = absl::StrCat("cpu", device);
      points.push_back(p);
    }
  }
  data.AddMetrics(points);
  SystemQuery query;
  query.width = 4000;
  const SystemSeries s = data.QuerySystem(query);
  EXPECT_EQ(s.series.size(), 601u);  // And the total.
  int64_t cells = 0;
  for (const ReducedSeries& r : s.series) cells += static_cast<int64_t>(r.cells.size());
  EXPECT_LE(cells, kMaxCells);
  EXPECT_GE(s.buckets.output_buckets(), 1000);  // Still a useful chart.
}

TEST(JobInsightsTest, TimesNoClockCanReachAreLeftOut) {
  // What the store's PlausibleTimes would have dropped, fed directly: the
  // series and the summary keep to the data's own time.
  JobInsights data;
  data.AddMetrics({CpuPoint(1795300000, 10), CpuPoint(1e300, 20), CpuPoint(-1e300, 20),
                   CpuPoint(1795300060, 30)});
  FrameworkEvent forever;
  forever.name = "forward";
  forever.start_us = 1795300000000000;
  forever.duration_us = int64_t{1} << 62;
  data.AddFrameworkEvents({forever});
  const TrainingSummary summary = data.Summary(/*ended=*/true);
  ASSERT_TRUE(summary.start.has_value());
  EXPECT_EQ(*summary.start, 1795300000);
  EXPECT_EQ(summary.latest, 1795300060);
  const SystemSeries s = data.QuerySystem({});
  EXPECT_EQ(s.end, 1795300060);
}

// The agent's network series (Type network) are network series in bytes/s.
TEST(JobInsightsTest, TheAgentsNetworkDimensionsAreNetworkSeries) {
  EXPECT_EQ(MetricOfDimension("ReceiveBytesPerSecond"), Metric::kNetworkRx);
  EXPECT_EQ(MetricOfDimension("TransmitBytesPerSecond"), Metric::kNetworkTx);
  EXPECT_EQ(MetricOfDimension("NetworkRxBytes"), Metric::kNetworkRx);
  EXPECT_EQ(MetricOfDimension("DiskReadBytesPerSecond"), std::nullopt);
  EXPECT_FALSE(IsPercent(Metric::kNetworkRx));
}

}  // namespace
}  // namespace debugplane::rules_engine::insights
