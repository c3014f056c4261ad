// The ProfilerReport's HTML page and JSON summary (profiler_report.h): over
// the real fixtures (tests/data/profiler), hostile strings, long
// synthetic runs (bounded size), and statistics recomputed here.

#include "rules_engine/report/profiler_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "objectstore/local_object_store.h"
#include "rules_engine/profiler/framework_timeline_reader.h"
#include "rules_engine/profiler/system_metrics_reader.h"
#include "rules_engine/profiler_rules/profiler_rules.h"

namespace debugplane::rules_engine {
namespace {

using ::nlohmann::json;
using profiler_report_internal::Buckets;
using profiler_report_internal::PercentHistogram;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kSystem = DP_TEST_DATA_DIR "/profiler/system";
const std::string kFramework = DP_TEST_DATA_DIR "/profiler/framework/pytorch-step-outlier";

std::vector<SystemMetricPoint> ReadSystem(const std::string& folder) {
  SystemMetricsReader reader(objectstore::OpenLocalPath(kSystem + "/" + folder).value());
  std::vector<SystemMetricPoint> points = reader.ReadNew();
  EXPECT_GT(points.size(), 1000u) << reader.Summary();
  return points;
}

std::vector<FrameworkEvent> ReadFramework() {
  FrameworkTimelineReader reader(objectstore::OpenLocalPath(kFramework).value());
  std::vector<FrameworkEvent> events = reader.ReadNew();
  EXPECT_GT(events.size(), 640u) << reader.Summary();
  return events;
}

// Every profiler rule with its defaults over the data, as the scheduler
// would run them.
std::vector<ProfilerRuleFinding> RunAllRules(const std::vector<SystemMetricPoint>& points,
                                             const std::vector<FrameworkEvent>& events) {
  std::vector<ProfilerRuleFinding> findings;
  for (const std::string& name : ProfilerRuleNames()) {
    auto rule = CreateProfilerRule(name, {});
    if (!rule.ok()) {
      ADD_FAILURE() << name << ": " << rule.status();
      continue;
    }
    if ((*rule)->WantsSystemMetrics()) (*rule)->OnMetrics(points);
    if ((*rule)->WantsFrameworkEvents()) (*rule)->OnFrameworkEvents(events);
    (*rule)->OnEnd();
    findings.push_back((*rule)->Finding());
  }
  return findings;
}

ProfilerReportContext Context(std::string job = "report-test-job") {
  ProfilerReportContext c;
  c.training_job_name = std::move(job);
  c.rule_configuration_name = "ProfilerReport";
  c.training_job_status = "InProgress";
  c.generated_at = absl::FromUnixSeconds(1795300800);
  c.data_summary = "16 files, 14400 points";
  return c;
}

FrameworkEvent Step(int64_t step, int64_t duration_us, std::string mode = "TRAIN",
                    std::string node = "algo-1") {
  FrameworkEvent e;
  e.name = "Step:ModeKeys." + mode;
  e.category = e.name;
  e.step = step;
  e.start_us = 1795300800000000 + step * 10000;
  e.duration_us = duration_us;
  e.node_id = std::move(node);
  return e;
}

SystemMetricPoint Point(MetricDimension dim, std::string name, double value, double ts,
                        std::string node = "algo-1") {
  SystemMetricPoint p;
  p.type = dim == MetricDimension::kGpuUtilization || dim == MetricDimension::kGpuMemoryUtilization
               ? "gpu"
               : "cpu";
  p.name = std::move(name);
  p.dim = dim;
  p.value = value;
  p.timestamp = ts;
  p.node_id = std::move(node);
  switch (dim) {
    case MetricDimension::kCpuUtilization:
      p.dimension = "CPUUtilization";
      break;
    case MetricDimension::kGpuUtilization:
      p.dimension = "GPUUtilization";
      break;
    case MetricDimension::kGpuMemoryUtilization:
      p.dimension = "GPUMemoryUtilization";
      break;
    case MetricDimension::kMemoryUsedPercent:
      p.dimension = "MemoryUsedPercent";
      break;
    case MetricDimension::kIoWaitPercentage:
      p.dimension = "I/OWaitPercentage";
      break;
    default:
      p.dimension = "Other";
  }
  return p;
}

// Nearest rank: the ceil(q * n)-th smallest (1-based), as documented.
double NearestRank(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  size_t rank = std::max<size_t>(1, static_cast<size_t>(std::ceil(q * v.size())));
  return v[rank - 1];
}

int CountOf(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t pos = haystack.find(needle); pos != std::string::npos;
       pos = haystack.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

// Nothing the page could fetch: no script, no URL-bearing attribute or CSS.
void ExpectSelfContained(const std::string& html) {
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("src=")));
  EXPECT_THAT(html, Not(HasSubstr("url(")));
  EXPECT_THAT(html, Not(HasSubstr("@import")));
  EXPECT_THAT(html, Not(HasSubstr("href=\"http")));
  EXPECT_THAT(html, Not(HasSubstr("<img")));
  EXPECT_TRUE(absl::StartsWith(html, "<!DOCTYPE html>"));
  EXPECT_TRUE(absl::EndsWith(html, "</html>\n"));
}

// --- Buckets and histograms --------------------------------------------------

// Whatever order and range the values come in, the buckets equal a direct
// bucketing of all values at the final grid, and the grid stays valid.
TEST(ProfilerReportBuckets, MergesExactlyAsTheRangeGrows) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> jitter(-3, 3);
  Buckets b(50, 1.0);
  std::vector<std::pair<double, double>> added;
  double x = 1000.3;
  for (int i = 0; i < 5000; ++i) {
    x += 0.7 + jitter(rng) * 0.2;
    double xi = (i % 97 == 0) ? x - 400 : x;  // Some late, earlier points.
    double v = static_cast<double>(i % 13);
    b.Add(xi, v);
    added.push_back({xi, v});
  }
  ASSERT_FALSE(b.empty());
  double w = b.width();
  EXPECT_EQ(std::exp2(std::round(std::log2(w))), w) << "width is base * 2^k";
  EXPECT_EQ(std::fmod(b.origin(), w), 0) << "origin aligned to the width";
  std::vector<Buckets::Cell> direct(50);
  for (const auto& [xi, v] : added) {
    int i = static_cast<int>(std::floor((xi - b.origin()) / w));
    ASSERT_GE(i, 0);
    ASSERT_LT(i, 50) << "value " << xi << " outside the grid";
    Buckets::Cell& c = direct[i];
    c.min = c.count ? std::min(c.min, v) : v;
    c.max = c.count ? std::max(c.max, v) : v;
    c.sum += v;
    ++c.count;
  }
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(b.cells()[i].count, direct[i].count) << i;
    EXPECT_DOUBLE_EQ(b.cells()[i].sum, direct[i].sum) << i;
    if (direct[i].count) {
      EXPECT_EQ(b.cells()[i].min, direct[i].min) << i;
      EXPECT_EQ(b.cells()[i].max, direct[i].max) << i;
    }
  }
  // Expanding to a common, wider grid keeps every value.
  Buckets wider = b;
  wider.ExpandTo(w * 4, b.min_x() - 1000, b.max_x());
  int64_t total = 0;
  for (const auto& c : wider.cells()) total += c.count;
  EXPECT_EQ(total, 5000);
  EXPECT_GE(wider.width(), w * 4);
  EXPECT_LE(wider.origin(), b.min_x() - 1000);
}

TEST(ProfilerReportBuckets, PercentQuantilesAreNearestRankWithinResolution) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0, 100);
  PercentHistogram h;
  std::vector<double> values;
  for (int i = 0; i < 3001; ++i) {
    double v = u(rng);
    h.Add(v);
    values.push_back(v);
  }
  for (double q : {0.01, 0.5, 0.95, 1.0}) {
    EXPECT_NEAR(h.Quantile(q), NearestRank(values, q),
                ProfilerReportData::kValueResolution / 2 + 1e-9)
        << q;
  }
  EXPECT_EQ(h.max(), *std::max_element(values.begin(), values.end()));
}

// --- Fixtures ------------------------------------------------------------------

TEST(ProfilerReport, CpuBottleneckFixtureDrawsEveryMetricChart) {
  std::vector<SystemMetricPoint> points = ReadSystem("cpu_bottleneck");
  ProfilerReportData data;
  // In uneven chunks, as ReadNew would give them.
  for (size_t i = 0; i < points.size(); i += 777) {
    data.AddMetrics(
        absl::MakeConstSpan(points).subspan(i, std::min<size_t>(777, points.size() - i)));
  }
  EXPECT_EQ(data.metric_points(), static_cast<int64_t>(points.size()));
  EXPECT_EQ(data.step_events(), 0);
  EXPECT_FALSE(data.empty());
  std::vector<ProfilerRuleFinding> findings = RunAllRules(points, {});
  std::string html = RenderProfilerReportHtml(data, findings, Context());
  ExpectSelfContained(html);
  for (const char* id :
       {"chart-cpu", "chart-gpu", "chart-heatmap", "chart-gpu-memory", "chart-host"}) {
    EXPECT_THAT(html, HasSubstr(absl::StrCat("<svg class=\"chart\" id=\"", id, "\""))) << id;
    EXPECT_THAT(html, Not(HasSubstr(absl::StrCat("id=\"", id, "-empty\"")))) << id;
  }
  // No framework data: the step charts say so.
  EXPECT_THAT(html, HasSubstr("id=\"chart-step-histogram-empty\""));
  EXPECT_THAT(html, HasSubstr("id=\"chart-step-timeline-empty\""));
  // CPUBottleneck fired: its row is first and highlighted, its threshold
  // drawn on the CPU chart.
  size_t first_row = html.find("<tr class=\"finding");
  ASSERT_NE(first_row, std::string::npos);
  EXPECT_THAT(html.substr(first_row, 120), HasSubstr("issues"));
  EXPECT_THAT(html, HasSubstr(">CPUBottleneck</td><td><span class=\"badge IssuesFound\">"));
  EXPECT_THAT(html, HasSubstr("CPUBottleneck cpu_threshold 90%"));
  EXPECT_THAT(html, HasSubstr("cpu_threshold = 90"));
  // 4 cores + 1 GPU: one heatmap row each.
  EXPECT_EQ(CountOf(html, "class=\"heat-row\""), 5);
  EXPECT_THAT(html, HasSubstr("Live — regenerated as data arrives"));
  EXPECT_LT(html.size(), 300u * 1024);
}

TEST(ProfilerReport, JsonUtilizationSummaryMatchesTheFixture) {
  std::vector<SystemMetricPoint> points = ReadSystem("gpu_memory_increase");
  ProfilerReportData data;
  data.AddMetrics(points);
  std::vector<ProfilerRuleFinding> findings = RunAllRules(points, {});
  ProfilerReportContext ctx = Context();
  ctx.final = true;
  ctx.training_job_status = "Completed";
  json j = json::parse(RenderProfilerReportJson(data, findings, ctx));
  EXPECT_EQ(j["job"], "report-test-job");
  EXPECT_EQ(j["rule_configuration_name"], "ProfilerReport");
  EXPECT_EQ(j["training_job_status"], "Completed");
  EXPECT_EQ(j["final"], true);
  EXPECT_EQ(j["generated_at"], "2026-11-21T22:40:00Z");
  EXPECT_EQ(j["data_summary"], "16 files, 14400 points");

  // Independently: per (dimension, node, device).
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<double>> by_device;
  double first = 1e300, last = -1e300;
  for (const SystemMetricPoint& p : points) {
    // string_view: whatever the fields' representation (std::string or interned).
    by_device[{std::string(absl::string_view(p.dimension)),
               std::string(absl::string_view(p.node_id)), std::string(absl::string_view(p.name))}]
        .push_back(p.value);
    first = std::min(first, p.timestamp);
    last = std::max(last, p.timestamp);
  }
  const json& sys = j["system"];
  EXPECT_EQ(sys["metric_points"], static_cast<int64_t>(points.size()));
  EXPECT_EQ(sys["start"],
            absl::FormatTime("%Y-%m-%dT%H:%M:%E*SZ",
                             absl::FromUnixMicros(std::llround(first * 1e6)), absl::UTCTimeZone()));
  EXPECT_EQ(sys["end"],
            absl::FormatTime("%Y-%m-%dT%H:%M:%E*SZ", absl::FromUnixMicros(std::llround(last * 1e6)),
                             absl::UTCTimeZone()));
  EXPECT_EQ(sys["nodes"], json::array({"algo-1"}));
  ASSERT_EQ(sys["devices"].size(), by_device.size());
  for (const json& d : sys["devices"]) {
    auto it = by_device.find({d["dimension"], d["node"], d["device"]});
    ASSERT_NE(it, by_device.end()) << d.dump();
    const std::vector<double>& v = it->second;
    double sum = 0;
    for (double x : v) sum += x;
    SCOPED_TRACE(d.dump());
    EXPECT_EQ(d["count"], static_cast<int64_t>(v.size()));
    EXPECT_NEAR(d["mean"].get<double>(), sum / v.size(), 1e-9);
    EXPECT_NEAR(d["p50"].get<double>(), NearestRank(v, 0.5), 0.05 + 1e-9);
    EXPECT_NEAR(d["p95"].get<double>(), NearestRank(v, 0.95), 0.05 + 1e-9);
    EXPECT_EQ(d["max"].get<double>(), *std::max_element(v.begin(), v.end()));
    EXPECT_EQ(d["min"].get<double>(), *std::min_element(v.begin(), v.end()));
  }
  // GPU memory climbs 40% -> 90%: the summary shows it.
  for (const json& d : sys["devices"]) {
    if (d["dimension"] == "GPUMemoryUtilization") {
      EXPECT_GT(d["max"].get<double>(), 85);
    }
  }
  // Findings in the given order with their documented fields.
  ASSERT_EQ(j["findings"].size(), findings.size());
  for (size_t i = 0; i < findings.size(); ++i) {
    const json& f = j["findings"][i];
    EXPECT_EQ(f["rule"], findings[i].rule);
    EXPECT_EQ(f["status"], ProfilerRuleStatusName(findings[i].status));
    EXPECT_EQ(f["details"], findings[i].details);
    using Parameters = std::map<std::string, std::string>;
    EXPECT_EQ(f["parameters"].get<Parameters>(), findings[i].parameters);
    EXPECT_EQ(f["datapoints"], findings[i].datapoints);
    EXPECT_EQ(f["violations"], findings[i].violations);
    if (findings[i].rule == "GPUMemoryIncrease") {
      EXPECT_EQ(f["status"], "IssuesFound");
    }
  }
  EXPECT_EQ(j["steps"]["count"], 0);
  EXPECT_TRUE(j["steps"]["mean_ms"].is_null());
  std::string html = RenderProfilerReportHtml(data, findings, ctx);
  EXPECT_THAT(html, HasSubstr("Final report"));
  EXPECT_THAT(html, Not(HasSubstr("Live —")));
}

TEST(ProfilerReport, StepOutlierFixtureMarksTheOutlierSteps) {
  std::vector<FrameworkEvent> events = ReadFramework();
  ProfilerReportData data;
  data.AddFrameworkEvents(events);
  std::vector<ProfilerRuleFinding> findings = RunAllRules({}, events);
  const ProfilerRuleFinding* outlier = nullptr;
  for (const auto& f : findings) {
    if (f.rule == "StepOutlier") outlier = &f;
  }
  ASSERT_NE(outlier, nullptr);
  ASSERT_EQ(outlier->flagged_steps.size(), 12u) << outlier->details;

  // Step statistics, independently.
  std::vector<double> durations;
  std::map<int64_t, int64_t> by_step;
  for (const FrameworkEvent& e : events) {
    if (StepEventMode(e.name).empty()) continue;
    durations.push_back(static_cast<double>(e.duration_us));
    by_step[e.step] = std::max(by_step[e.step], e.duration_us);
  }
  ASSERT_EQ(durations.size(), 640u);
  EXPECT_EQ(data.step_events(), 640);
  json j = json::parse(RenderProfilerReportJson(data, findings, Context()));
  const json& s = j["steps"];
  double sum = 0;
  for (double d : durations) sum += d;
  EXPECT_EQ(s["count"], 640);
  EXPECT_EQ(s["exact"], true);
  EXPECT_NEAR(s["mean_ms"].get<double>(), sum / 640 / 1000, 1e-9);
  EXPECT_DOUBLE_EQ(s["p50_ms"].get<double>(), NearestRank(durations, 0.5) / 1000);
  EXPECT_DOUBLE_EQ(s["p95_ms"].get<double>(), NearestRank(durations, 0.95) / 1000);
  EXPECT_DOUBLE_EQ(s["max_ms"].get<double>(),
                   *std::max_element(durations.begin(), durations.end()) / 1000);
  EXPECT_EQ(s["modes"], json({{"TRAIN", 640}}));
  EXPECT_EQ(s["outlier_steps"].get<std::vector<int64_t>>(), outlier->flagged_steps);
  ASSERT_EQ(s["slowest"].size(), 10u);
  // The slowest ten are all among the 300 ms outliers.
  std::set<int64_t> flagged(outlier->flagged_steps.begin(), outlier->flagged_steps.end());
  for (const json& r : s["slowest"]) {
    EXPECT_TRUE(flagged.count(r["step"].get<int64_t>())) << r.dump();
    EXPECT_GT(r["duration_ms"].get<double>(), 250);
  }

  std::string html = RenderProfilerReportHtml(data, findings, Context());
  ExpectSelfContained(html);
  EXPECT_THAT(html, HasSubstr("<svg class=\"chart\" id=\"chart-step-histogram\""));
  EXPECT_THAT(html, HasSubstr("<svg class=\"chart\" id=\"chart-step-timeline\""));
  EXPECT_THAT(html, HasSubstr("id=\"outlier-steps\""));
  for (int64_t step : outlier->flagged_steps) {
    EXPECT_THAT(html, HasSubstr(absl::StrCat("<li>step ", step, " <span class=\"dur\">"))) << step;
  }
  EXPECT_EQ(CountOf(html, "class=\"outlier-marker\""), 12);
  EXPECT_EQ(CountOf(html, "class=\"outlier-dot\""), 12);
  EXPECT_GE(CountOf(html, "class=\"bar outlier\""), 1);
  // Normal ~3-6 ms steps and ~300 ms outliers: a log axis.
  EXPECT_THAT(html, HasSubstr("step duration (log scale)"));
  // No system metrics: the metric charts say so, GPU suggests CPU-only.
  EXPECT_THAT(html, HasSubstr("id=\"chart-gpu-empty\""));
  EXPECT_THAT(html, HasSubstr("is this a CPU-only instance?"));
  EXPECT_THAT(html, HasSubstr("id=\"chart-cpu-empty\""));
  EXPECT_THAT(html, HasSubstr("id=\"chart-heatmap-empty\""));
}

// --- Escaping, empty, ordering ------------------------------------------------

TEST(ProfilerReport, EscapesEveryStringFromTheData) {
  const std::string hostile = "<script>alert(\"x\")</script>'&\"><img onerror=alert(1)>";
  ProfilerReportData data;
  std::vector<SystemMetricPoint> points;
  for (int i = 0; i < 20; ++i) {
    points.push_back(Point(MetricDimension::kCpuUtilization, hostile, 50, 1000 + i, hostile));
    points.push_back(Point(MetricDimension::kGpuUtilization, "gpu<0>", 50, 1000 + i, hostile));
  }
  data.AddMetrics(points);
  data.AddFrameworkEvents({Step(1, 5000, "TRAIN", hostile), Step(2, 900000, "TRAIN", hostile)});
  ProfilerRuleFinding f;
  f.rule = "Custom" + hostile;
  f.status = RuleVerdict::Kind::kIssuesFound;
  f.details = "details " + hostile;
  f.parameters = {{"threshold" + hostile, hostile}};
  f.flagged_steps = {2};
  ProfilerReportContext ctx = Context(hostile);
  ctx.rule_configuration_name = hostile;
  ctx.training_job_status = hostile;
  ctx.data_summary = hostile;
  std::string html = RenderProfilerReportHtml(data, {f}, ctx);
  ExpectSelfContained(html);
  EXPECT_THAT(html, Not(HasSubstr(hostile)));
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("gpu<0>")));
  EXPECT_THAT(html, HasSubstr("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39;&amp;"));
  // The job name appears escaped in <title>, the header; details in the table.
  EXPECT_GE(CountOf(html, "&lt;img onerror=alert(1)&gt;"), 5);

  // JSON keeps the strings as they are (and parses).
  json j = json::parse(RenderProfilerReportJson(data, {f}, ctx));
  EXPECT_EQ(j["job"], hostile);
  EXPECT_EQ(j["findings"][0]["details"], "details " + hostile);
  EXPECT_EQ(j["steps"]["slowest"][0]["node"], hostile);
  // Invalid UTF-8 is replaced, not thrown on.
  ctx.training_job_name = "bad\xff\xfe";
  EXPECT_NO_THROW(json::parse(RenderProfilerReportJson(data, {f}, ctx)));
}

TEST(ProfilerReport, EmptyDataShowsAnEmptyStatePerChart) {
  ProfilerReportData data;
  EXPECT_TRUE(data.empty());
  std::string html = RenderProfilerReportHtml(data, {}, Context());
  ExpectSelfContained(html);
  for (const char* id : {"chart-cpu", "chart-gpu", "chart-heatmap", "chart-gpu-memory",
                         "chart-host", "chart-step-histogram", "chart-step-timeline", "findings"}) {
    EXPECT_THAT(html, HasSubstr(absl::StrCat("id=\"", id, "-empty\""))) << id;
  }
  EXPECT_THAT(html, Not(HasSubstr("<svg")));
  json j = json::parse(RenderProfilerReportJson(data, {}, Context()));
  EXPECT_TRUE(j["system"]["start"].is_null());
  EXPECT_TRUE(j["steps"]["p50_ms"].is_null());
  EXPECT_EQ(j["findings"], json::array());
  EXPECT_EQ(j["system"]["devices"], json::array());
}

TEST(ProfilerReport, FindingsTableListsIssuesFirstWithParameters) {
  std::vector<ProfilerRuleFinding> findings(4);
  findings[0].rule = "RuleClean";
  findings[0].status = RuleVerdict::Kind::kNoIssuesFound;
  findings[1].rule = "RuleRunning";
  findings[1].status = RuleVerdict::Kind::kContinue;
  findings[2].rule = "RuleBad";
  findings[2].status = RuleVerdict::Kind::kIssuesFound;
  findings[2].violations = 1234;
  findings[2].parameters = {{"threshold", "42"}, {"patience", "7"}};
  findings[3].rule = "RuleBroken";
  findings[3].status = RuleVerdict::Kind::kError;
  std::string html = RenderProfilerReportHtml(ProfilerReportData(), findings, Context());
  size_t bad = html.find(">RuleBad<"), broken = html.find(">RuleBroken<"),
         running = html.find(">RuleRunning<"), clean = html.find(">RuleClean<");
  ASSERT_NE(clean, std::string::npos);
  EXPECT_LT(bad, broken);
  EXPECT_LT(broken, running);
  EXPECT_LT(running, clean);
  EXPECT_THAT(html, HasSubstr("<span class=\"badge InProgress\">InProgress</span>"));
  EXPECT_THAT(html, HasSubstr("<span class=\"badge Error\">Error</span>"));
  EXPECT_THAT(html, HasSubstr("<td class=\"num\">1,234</td>"));
  EXPECT_THAT(html, HasSubstr("<span class=\"param\">threshold = 42</span>"));
  EXPECT_EQ(CountOf(html, "<tr class=\"finding issues\""), 1);
  EXPECT_THAT(html, HasSubstr("1 of 4"));
  json j = json::parse(RenderProfilerReportJson(ProfilerReportData(), findings, Context()));
  EXPECT_EQ(j["findings"][0]["status"], "NoIssuesFound");
  EXPECT_EQ(j["findings"][1]["status"], "InProgress");
  EXPECT_EQ(j["findings"][2]["status"], "IssuesFound");
  EXPECT_EQ(j["findings"][3]["status"], "Error");
}

// --- Bounded size ---------------------------------------------------------------

// A month of metrics from 16 nodes (8 cores, 4 GPUs each) and 300,000 steps:
// the page stays well under 2 MB, the step statistics come from the histogram
// within its documented error, and memory stays bounded (no exact durations).
TEST(ProfilerReport, LongManyDeviceRunStaysBounded) {
  ProfilerReportData data;
  constexpr int kNodes = 16, kCpus = 8, kGpus = 4;
  constexpr double kStart = 1795300800, kInterval = 600;  // 10 min for 30 days.
  const int samples = static_cast<int>(30 * 86400 / kInterval);
  std::vector<SystemMetricPoint> batch;
  int64_t total = 0;
  for (int t = 0; t < samples; ++t) {
    batch.clear();
    double ts = kStart + t * kInterval;
    for (int n = 0; n < kNodes; ++n) {
      std::string node = absl::StrCat("algo-", n + 1);
      double phase = std::sin(t / 200.0 + n);
      for (int c = 0; c < kCpus; ++c) {
        batch.push_back(Point(MetricDimension::kCpuUtilization, absl::StrCat("cpu", c),
                              50 + 40 * phase, ts, node));
      }
      for (int g = 0; g < kGpus; ++g) {
        batch.push_back(Point(MetricDimension::kGpuUtilization, absl::StrCat("gpu", g),
                              50 - 40 * phase, ts, node));
        batch.push_back(Point(MetricDimension::kGpuMemoryUtilization, absl::StrCat("gpu", g),
                              30 + t * 60.0 / samples, ts, node));
      }
      batch.push_back(Point(MetricDimension::kMemoryUsedPercent, "cpu", 40, ts, node));
      batch.push_back(Point(MetricDimension::kIoWaitPercentage, "cpu", 5, ts, node));
    }
    total += static_cast<int64_t>(batch.size());
    data.AddMetrics(batch);
  }
  EXPECT_EQ(data.metric_points(), total);
  std::vector<double> durations;
  std::vector<FrameworkEvent> steps;
  constexpr int kSteps = 300000;
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> dist(std::log(20000), 0.3);
  for (int i = 0; i < kSteps; ++i) {
    int64_t d = static_cast<int64_t>(dist(rng));
    durations.push_back(static_cast<double>(d));
    steps.push_back(Step(i, d, i % 10 == 0 ? "EVAL" : "TRAIN"));
    if (steps.size() == 10000) {
      data.AddFrameworkEvents(steps);
      steps.clear();
    }
  }
  data.AddFrameworkEvents(steps);
  EXPECT_FALSE(data.steps_exact());
  EXPECT_TRUE(data.step_durations_us().empty());

  ProfilerRuleFinding f;
  f.rule = "StepOutlier";
  f.status = RuleVerdict::Kind::kIssuesFound;
  for (int i = 0; i < 500; ++i) f.flagged_steps.push_back(i * 600);
  std::string html = RenderProfilerReportHtml(data, {f}, Context());
  EXPECT_LT(html.size(), 2u * 1024 * 1024);
  ExpectSelfContained(html);
  for (const char* id : {"chart-cpu", "chart-gpu", "chart-heatmap", "chart-gpu-memory",
                         "chart-host", "chart-step-histogram", "chart-step-timeline"}) {
    EXPECT_THAT(html, HasSubstr(absl::StrCat("<svg class=\"chart\" id=\"", id, "\""))) << id;
  }
  // 128 CPU + 64 GPU devices: the heatmap falls back to one row per node and
  // kind; the GPU chart to a mean line and range band.
  EXPECT_EQ(CountOf(html, "class=\"heat-row\""), 2 * kNodes);
  EXPECT_THAT(html, HasSubstr("class=\"band\""));
  EXPECT_THAT(html, HasSubstr("and 300 more"));

  json j = json::parse(RenderProfilerReportJson(data, {f}, Context()));
  const json& s = j["steps"];
  EXPECT_EQ(s["count"], kSteps);
  EXPECT_EQ(s["exact"], false);
  double sum = 0;
  for (double d : durations) sum += d;
  EXPECT_NEAR(s["mean_ms"].get<double>(), sum / kSteps / 1000, 1e-6);
  for (auto [key, q] : {std::pair{"p50_ms", 0.5}, std::pair{"p95_ms", 0.95}}) {
    double truth = NearestRank(durations, q) / 1000;
    EXPECT_NEAR(s[key].get<double>(), truth, truth * 0.012) << key;
  }
  EXPECT_EQ(s["max_ms"].get<double>(),
            *std::max_element(durations.begin(), durations.end()) / 1000);
  EXPECT_EQ(s["modes"]["EVAL"], kSteps / 10);
  EXPECT_EQ(j["system"]["devices"].size(), static_cast<size_t>(kNodes * (kCpus + 2 * kGpus + 2)));
  EXPECT_GE(j["system"]["bucket_seconds"].get<double>(), 30 * 86400.0 / 240);
}

// Beyond kMaxDeviceSeries devices, points still count per node; none is lost
// from the totals.
TEST(ProfilerReport, DeviceSeriesAreCapped) {
  ProfilerReportData data;
  std::vector<SystemMetricPoint> points;
  for (int d = 0; d < ProfilerReportData::kMaxDeviceSeries + 10; ++d) {
    points.push_back(Point(MetricDimension::kCpuUtilization, absl::StrCat("cpu", d), 10, 1000,
                           absl::StrCat("node-", d / 64)));
  }
  data.AddMetrics(points);
  EXPECT_EQ(static_cast<int>(data.device_series().size()), ProfilerReportData::kMaxDeviceSeries);
  EXPECT_EQ(data.dropped_device_points(), 10);
  int64_t per_node = 0;
  for (const auto& [key, s] : data.node_series()) per_node += s.values.count();
  EXPECT_EQ(per_node, ProfilerReportData::kMaxDeviceSeries + 10);
  std::string html = RenderProfilerReportHtml(data, {}, Context());
  EXPECT_THAT(html, HasSubstr("id=\"chart-cpu\""));
}

}  // namespace
}  // namespace debugplane::rules_engine
