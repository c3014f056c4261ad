// The report's charts, each a card (ChartSection) with a stable id (see
// profiler_report.h), drawn with the chart kit (svg_charts.h) from
// ProfilerReportData and the rules' findings. Internal to
// rules_engine/report/.

#ifndef DEBUGPLANE_RULES_ENGINE_REPORT_REPORT_CHARTS_H_
#define DEBUGPLANE_RULES_ENGINE_REPORT_REPORT_CHARTS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "rules_engine/report/profiler_report.h"
#include "rules_engine/report/svg_charts.h"

namespace debugplane::rules_engine::profiler_report_internal {

using SeriesMap = std::map<ProfilerReportData::SeriesKey, ProfilerReportData::Series>;
using SeriesEntry = SeriesMap::value_type;

// The non-empty series of `dim` in `map`, in the map's order.
std::vector<const SeriesEntry*> SeriesOf(const SeriesMap& map, MetricDimension dim);
// The nodes with metrics.
std::set<std::string> Nodes(const ProfilerReportData& data);
// The devices with metrics of `dim`.
int CountDevices(const ProfilerReportData& data, MetricDimension dim);

// The steps StepOutlier flagged (other rules flag steps for other reasons,
// e.g. MaxInitializationTime the first), ascending, without repeats.
std::vector<int64_t> OutlierSteps(const std::vector<ProfilerRuleFinding>& findings);

// Threshold lines from the findings: the (rule, parameter) pairs' values.
std::vector<Reference> References(const std::vector<ProfilerRuleFinding>& findings,
                                  const std::vector<std::pair<std::string, std::string>>& which);

// Per-device lines of `dim` over time (per-node means with `per_node_mean`,
// or above 8 devices); `empty_message` without data.
ChartSection UtilizationChart(const ProfilerReportData& data, MetricDimension dim,
                              const std::string& id, const std::string& title, bool per_node_mean,
                              const std::vector<Reference>& refs, const std::string& empty_message);
// chart-host: host memory used and I/O wait per node over time.
ChartSection HostChart(const ProfilerReportData& data, const std::vector<Reference>& refs);
// chart-heatmap: devices (or nodes) x time buckets, coloured by mean
// utilization.
ChartSection Heatmap(const ProfilerReportData& data);
// chart-step-histogram: step durations, log-spaced bins when they span a
// wide range, StepOutlier's steps marked and listed.
ChartSection StepHistogram(const ProfilerReportData& data,
                           const std::vector<ProfilerRuleFinding>& findings);
// chart-step-timeline: step duration by step number (bucket mean and max),
// outliers as dots.
ChartSection StepTimeline(const ProfilerReportData& data,
                          const std::vector<ProfilerRuleFinding>& findings);

}  // namespace debugplane::rules_engine::profiler_report_internal

#endif  // DEBUGPLANE_RULES_ENGINE_REPORT_REPORT_CHARTS_H_
