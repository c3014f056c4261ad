#include "rules_engine/report/report_json.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rules_engine/report/report_charts.h"
#include "rules_engine/report/report_text.h"

namespace debugplane::rules_engine::profiler_report_internal {
namespace {

using nlohmann::json;

// Per device: its statistics, sorted by dimension, node, device.
json DevicesJson(const ProfilerReportData& data) {
  std::vector<std::pair<std::string, json>> devices;
  for (const auto& [key, series] : data.device_series()) {
    const auto& v = series.values;
    if (v.count() == 0) continue;
    json d = {
        {"node", key.node},        {"device", key.device}, {"dimension", DimensionName(key.dim)},
        {"count", v.count()},      {"mean", v.mean()},     {"p50", v.Quantile(0.5)},
        {"p95", v.Quantile(0.95)}, {"min", v.min()},       {"max", v.max()}};
    devices.emplace_back(absl::StrCat(DimensionName(key.dim), "\n", key.node, "\n", key.device),
                         std::move(d));
  }
  std::sort(devices.begin(), devices.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  json out = json::array();
  for (auto& [sort_key, d] : devices) out.push_back(std::move(d));
  return out;
}

}  // namespace

json FindingsJson(const std::vector<ProfilerRuleFinding>& findings) {
  json out = json::array();
  for (const ProfilerRuleFinding& f : findings) {
    out.push_back({{"rule", f.rule},
                   {"status", ProfilerRuleStatusName(f.status)},
                   {"details", f.details},
                   {"parameters", f.parameters},
                   {"datapoints", f.datapoints},
                   {"violations", f.violations},
                   {"flagged_steps", f.flagged_steps}});
  }
  return out;
}

json SystemJson(const ProfilerReportData& data) {
  json sys;
  sys["metric_points"] = data.metric_points();
  sys["start"] =
      data.metric_points() ? json(FormatRfc3339(TimeOfSeconds(data.first_timestamp()))) : json();
  sys["end"] =
      data.metric_points() ? json(FormatRfc3339(TimeOfSeconds(data.last_timestamp()))) : json();
  double bucket = 0;
  for (const auto& [key, series] : data.node_series()) {
    if (!series.buckets.empty()) bucket = std::max(bucket, series.buckets.width());
  }
  sys["bucket_seconds"] = bucket > 0 ? json(bucket) : json();
  std::set<std::string> nodes = Nodes(data);
  sys["nodes"] = std::vector<std::string>(nodes.begin(), nodes.end());
  sys["devices"] = DevicesJson(data);
  return sys;
}

json StepsJson(const ProfilerReportData& data, const std::vector<ProfilerRuleFinding>& findings) {
  json steps;
  const int64_t count = data.step_events();
  steps["count"] = count;
  steps["exact"] = data.steps_exact();
  auto ms = [&](double us) { return count ? json(us / 1000.0) : json(); };
  steps["mean_ms"] = ms(data.step_mean_us());
  steps["p50_ms"] = ms(data.StepQuantileUs(0.5));
  steps["p95_ms"] = ms(data.StepQuantileUs(0.95));
  steps["min_ms"] = ms(static_cast<double>(data.step_min_us()));
  steps["max_ms"] = ms(static_cast<double>(data.step_max_us()));
  steps["modes"] = data.step_modes();
  steps["outlier_steps"] = OutlierSteps(findings);
  json slowest = json::array();
  for (const auto& r : data.slowest_steps()) {
    slowest.push_back({{"step", r.step},
                       {"mode", r.mode},
                       {"node", r.node},
                       {"duration_ms", static_cast<double>(r.duration_us) / 1000.0}});
  }
  steps["slowest"] = std::move(slowest);
  return steps;
}

}  // namespace debugplane::rules_engine::profiler_report_internal
