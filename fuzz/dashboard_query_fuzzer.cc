// libFuzzer target: the dashboard's data routes from the query string to the
// reply (service/dashboard/insights_query.h, insights_routes.h), over a job
// whose data the input also shapes. Every input is used four ways:
//   - as a query string: every parameter parser; a system or framework
//     query that parses is answered (JobInsights' query-to-bucket path and
//     the reply's JSON, with the fields it names) on a small fixed job;
//   - as an Accept-Encoding header (gzip_reply.h's AcceptsGzip);
//   - as raw numbers (its first bytes as two doubles and a width): the
//     range goes to JobInsights without the parser, so huge, negative,
//     NaN, infinite and reversed ranges reach the bucket arithmetic;
//   - as sample times (the next bytes, doubles): fed through PlausibleTimes
//     (rules_engine/profiler/plausible_times.h) and, unfiltered, straight
//     into a JobInsights, then queried at the raw range.
// Any answer must have 1..width buckets, one cell per bucket in every
// series, and bucket times inside [0, kLatestTime].
//   scripts/fuzz.sh dashboard_query_fuzzer

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "rules_engine/insights/job_insights.h"
#include "rules_engine/profiler/plausible_times.h"
#include "service/dashboard/gzip_reply.h"
#include "service/dashboard/insights_query.h"
#include "service/dashboard/insights_routes.h"

namespace dashboard = debugplane::service::dashboard;
namespace insights = debugplane::rules_engine::insights;
using debugplane::rules_engine::FrameworkEvent;
using debugplane::rules_engine::MetricDimension;
using debugplane::rules_engine::PlausibleTimes;
using debugplane::rules_engine::SystemMetricPoint;

namespace {

constexpr double kJobStart = 1795300000;  // 2026-11-21.

SystemMetricPoint Cpu(double t, double value) {
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

FrameworkEvent Step(int64_t start_us, int64_t duration_us) {
  FrameworkEvent e;
  e.name = "Step:ModeKeys.TRAIN";
  e.start_us = start_us;
  e.duration_us = duration_us;
  e.timeline_start_us = start_us;
  return e;
}

const insights::JobInsights& FixedJob() {
  static const insights::JobInsights* const job = [] {
    auto* data = new insights::JobInsights();
    std::vector<SystemMetricPoint> points;
    for (int i = 0; i < 600; ++i) points.push_back(Cpu(kJobStart + i * 0.5, i % 100));
    data->AddMetrics(points);
    std::vector<FrameworkEvent> events;
    for (int i = 0; i < 100; ++i) {
      events.push_back(Step(static_cast<int64_t>(kJobStart * 1e6) + i * 100000, 90000));
    }
    data->AddFrameworkEvents(events);
    return data;
  }();
  return *job;
}

void Check(const insights::LevelChoice& buckets, size_t cells, int width) {
  const int64_t n = buckets.output_buckets();
  if (n < 1 || n > std::clamp(width, 1, insights::kMaxBuckets)) std::abort();
  if (cells != static_cast<size_t>(n)) std::abort();
  for (const int64_t i : {int64_t{0}, n - 1}) {
    const double t = buckets.output_start(i);
    if (!std::isfinite(t) || t < 0 || t > insights::kLatestTime) std::abort();
  }
}

void Query(const insights::JobInsights& data, const insights::TimeRange& range, int width) {
  insights::SystemQuery system;
  system.range = range;
  system.width = width;
  const insights::SystemSeries s = data.QuerySystem(system);
  for (const insights::ReducedSeries& r : s.series) Check(s.buckets, r.cells.size(), width);
  const insights::FrameworkSeries f = data.QueryFramework(range, width);
  for (const std::vector<double>& busy : f.busy) Check(f.buckets, busy.size(), width);
}

// The query-to-reply path of the routes, on the fixed job.
void Routes(absl::string_view text) {
  insights::JobView view;
  view.data = &FixedJob();
  insights::SystemQuery system;
  dashboard::SystemFields fields;
  if (dashboard::ParseSystemQuery(text, &system, &fields).ok()) {
    if (system.width < 1 || system.width > dashboard::kMaxWidth) std::abort();
    const insights::TimeRange& r = system.range;
    if (r.start && r.end && *r.start >= *r.end) std::abort();
    for (const auto& t : {r.start, r.end}) {
      if (t && (!std::isfinite(*t) || *t < 0 || *t > insights::kLatestTime)) std::abort();
    }
    Query(FixedJob(), system.range, system.width);
    (void)dashboard::SystemJson(view, system, fields);
  }
  insights::TimeRange range;
  int width = 0;
  if (dashboard::ParseFrameworkQuery(text, &range, &width).ok()) {
    (void)dashboard::FrameworkJson(view, range, width);
  }
  debugplane::v1::GetTensorValuesRequest tensor;
  if (dashboard::ParseTensorQuery(text, "job", &tensor).ok()) {
    if (tensor.tensor_name().empty() || tensor.max_points() < 1) std::abort();
  }
}

template <typename T>
bool Take(const uint8_t*& data, size_t& size, T* out) {
  if (size < sizeof(T)) return false;
  std::memcpy(out, data, sizeof(T));
  data += sizeof(T);
  size -= sizeof(T);
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Routes(absl::string_view(reinterpret_cast<const char*>(data), size));
  // The input as an Accept-Encoding header: never throws, any answer.
  (void)dashboard::AcceptsGzip(absl::string_view(reinterpret_cast<const char*>(data), size));

  double start = 0, end = 0;
  int32_t width = 0;
  if (!Take(data, size, &start) || !Take(data, size, &end) || !Take(data, size, &width)) return 0;
  insights::TimeRange range{start, end};
  if (width & 1) range.start.reset();  // One side left to the data, sometimes.
  if (width & 2) range.end.reset();
  Query(FixedJob(), range, width);

  // Sample times from the input: filtered as the store does, and raw.
  std::vector<SystemMetricPoint> points;
  std::vector<FrameworkEvent> events;
  double t = 0;
  while (points.size() < 16 && Take(data, size, &t)) {
    points.push_back(Cpu(t, 50));
    int64_t us = 0;
    std::memcpy(&us, &t, sizeof(us));
    events.push_back(Step(us, us & 0xffffff));
  }
  PlausibleTimes plausible;
  std::vector<SystemMetricPoint> kept = points;
  std::vector<FrameworkEvent> kept_events = events;
  plausible.FilterMetrics(&kept, absl::FromUnixSeconds(1795400000));
  plausible.FilterEvents(&kept_events, absl::FromUnixSeconds(1795400000));
  for (const SystemMetricPoint& p : kept) {
    if (!(p.timestamp >= PlausibleTimes::kEarliest)) std::abort();
  }
  insights::JobInsights filtered, raw;
  filtered.AddMetrics(kept);
  filtered.AddFrameworkEvents(kept_events);
  raw.AddMetrics(points);
  raw.AddFrameworkEvents(events);
  Query(filtered, range, width);
  Query(raw, range, width);
  const insights::TrainingSummary summary = raw.Summary(/*ended=*/true);
  if (summary.start && !(summary.latest - *summary.start <= insights::kLatestTime)) std::abort();
  return 0;
}
