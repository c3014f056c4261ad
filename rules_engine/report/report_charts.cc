#include "rules_engine/report/report_charts.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rules_engine/report/report_text.h"

namespace debugplane::rules_engine::profiler_report_internal {
namespace {

// The rule whose flagged steps are the outliers.
constexpr char kOutlierRule[] = "StepOutlier";

std::optional<double> Param(const ProfilerRuleFinding& f, const std::string& name) {
  auto it = f.parameters.find(name);
  double v;
  if (it == f.parameters.end() || !absl::SimpleAtod(it->second, &v)) return std::nullopt;
  return v;
}

// Labelled series regridded to one common grid (`*grid`), as chart lines.
std::vector<Line> LinesOnCommonGrid(std::vector<Buckets> buckets,
                                    const std::vector<std::string>& labels, TimeGrid* grid) {
  *grid = CommonGrid(buckets);
  std::vector<Line> lines;
  for (size_t i = 0; i < buckets.size(); ++i) lines.push_back({labels[i], Means(buckets[i])});
  return lines;
}

// --- Heatmap ---------------------------------------------------------------

struct HeatmapRow {
  std::string label;
  Buckets buckets;
};

// The CPU and GPU utilization rows of `map`: per node mean (`by_node`), or
// per device (named with its node when there are several).
void AddHeatmapRows(const SeriesMap& map, bool by_node, bool multi_node,
                    std::vector<HeatmapRow>* rows) {
  for (MetricDimension dim : {MetricDimension::kCpuUtilization, MetricDimension::kGpuUtilization}) {
    for (const SeriesEntry* e : SeriesOf(map, dim)) {
      std::string kind = dim == MetricDimension::kCpuUtilization ? "CPU" : "GPU";
      std::string label = by_node      ? absl::StrCat(e->first.node, " ", kind, " mean")
                          : multi_node ? absl::StrCat(e->first.node, " ", e->first.device)
                                       : e->first.device;
      rows->push_back({label, e->second.buckets});
    }
  }
}

// One row: its label, the background, and runs of equal colour as one rect
// each (keeps long jobs' pages small).
std::string HeatmapRowSvg(const std::string& label, const Buckets& buckets, const TimeGrid& g,
                          const Axis& x, double label_w, double ry, double row_h) {
  const double cell_w = (x.px1 - x.px0) / std::max(1, g.last - g.first + 1);
  std::string s = absl::StrCat(
      "<g class=\"heat-row\"><text class=\"tick\" x=\"", SvgNumber(label_w - 6), "\" y=\"",
      SvgNumber(ry + row_h / 2 + 4), "\" text-anchor=\"end\">", EscapeHtml(label),
      "</text><rect class=\"heat-bg\" x=\"", SvgNumber(x.px0), "\" y=\"", SvgNumber(ry),
      "\" width=\"", SvgNumber(x.px1 - x.px0), "\" height=\"", SvgNumber(row_h - 1), "\"/>");
  const auto means = Means(buckets);
  const auto level_of = [](double mean) {
    return std::clamp(static_cast<int>(mean / 10), 0, kHeatLevels - 1);
  };
  int i = g.first;
  while (i <= g.last) {
    if (!means[i]) {
      ++i;
      continue;
    }
    const int level = level_of(*means[i]);
    int j = i + 1;
    while (j <= g.last && means[j] && level_of(*means[j]) == level) ++j;
    absl::StrAppend(&s, "<rect x=\"", SvgNumber(x.px0 + (i - g.first) * cell_w), "\" y=\"",
                    SvgNumber(ry), "\" width=\"", SvgNumber((j - i) * cell_w + 0.4), "\" height=\"",
                    SvgNumber(row_h - 1), "\" fill=\"", kHeat[level], "\"/>");
    i = j;
  }
  return s + "</g>\n";
}

// The colour scale under the heatmap, at `ly`.
std::string HeatmapLegend(double label_w, double ly) {
  constexpr double kSwatchWidth = 28;
  std::string s =
      absl::StrCat("<g class=\"heat-legend\"><text class=\"tick\" x=\"", SvgNumber(label_w - 6),
                   "\" y=\"", SvgNumber(ly + 12), "\" text-anchor=\"end\">utilization</text>");
  for (int k = 0; k < kHeatLevels; ++k) {
    absl::StrAppend(&s, "<rect x=\"", SvgNumber(label_w + k * kSwatchWidth), "\" y=\"",
                    SvgNumber(ly), "\" width=\"", SvgNumber(kSwatchWidth),
                    "\" height=\"14\" fill=\"", kHeat[k], "\"/>");
  }
  for (int k = 0; k <= kHeatLevels; k += 2) {
    absl::StrAppend(&s, "<text class=\"tick\" x=\"", SvgNumber(label_w + k * kSwatchWidth),
                    "\" y=\"", SvgNumber(ly + 28), "\" text-anchor=\"middle\">", k * 10,
                    "%</text>");
  }
  absl::StrAppend(&s, "<rect class=\"heat-bg\" x=\"", SvgNumber(label_w + 11 * kSwatchWidth + 20),
                  "\" y=\"", SvgNumber(ly),
                  "\" width=\"14\" height=\"14\"/><text class=\"tick\" x=\"",
                  SvgNumber(label_w + 11 * kSwatchWidth + 40), "\" y=\"", SvgNumber(ly + 12),
                  "\">no data</text></g>\n");
  return s;
}

// --- Step duration histogram ---------------------------------------------

// The histogram's duration axis: [lo, hi] microseconds, log-spaced when the
// durations span a wide range (outliers are typically 10-100x a normal
// step), split into kBins bins.
struct DurationScale {
  static constexpr int kBins = 40;
  double lo, hi;
  bool log_scale;

  explicit DurationScale(const ProfilerReportData& data)
      : lo(std::max(1.0, static_cast<double>(data.step_min_us()))),
        hi(std::max(lo + 1, static_cast<double>(data.step_max_us()))),
        log_scale(hi / lo > 3) {}
  // 0..1 along the axis.
  double Position(double v) const {
    v = std::clamp(v, lo, hi);
    return log_scale ? std::log(v / lo) / std::log(hi / lo) : (v - lo) / (hi - lo);
  }
  int BinOf(double v) const {
    return std::clamp(static_cast<int>(Position(v) * kBins), 0, kBins - 1);
  }
  // The lower edge of bin b (b = kBins: the upper edge of the last).
  double Edge(int b) const {
    double f = static_cast<double>(b) / kBins;
    return log_scale ? lo * std::pow(hi / lo, f) : lo + f * (hi - lo);
  }
  // Round durations for the axis: 1-2-5 per decade (log), or nice steps.
  std::vector<double> Ticks() const;
};

std::vector<double> DurationScale::Ticks() const {
  std::vector<double> ticks;
  if (log_scale) {
    for (double mag = std::pow(10, std::floor(std::log10(lo))); mag <= hi; mag *= 10) {
      for (double m : {1.0, 2.0, 5.0}) {
        if (m * mag >= lo && m * mag <= hi) ticks.push_back(m * mag);
      }
    }
  } else {
    double step = NiceStep(hi - lo, 6);
    for (double t = std::ceil(lo / step) * step; t <= hi; t += step) ticks.push_back(t);
  }
  if (ticks.size() > 12) {  // Thin out a many-decade axis.
    std::vector<double> thin;
    for (size_t i = 0; i < ticks.size(); i += 3) thin.push_back(ticks[i]);
    ticks = thin;
  }
  return ticks;
}

// Steps per bin: from the exact durations, else from the log histogram.
std::vector<int64_t> StepsPerBin(const ProfilerReportData& data, const DurationScale& scale) {
  std::vector<int64_t> counts(DurationScale::kBins, 0);
  if (data.steps_exact()) {
    for (int64_t d : data.step_durations_us()) ++counts[scale.BinOf(static_cast<double>(d))];
    return counts;
  }
  const auto& fine = data.step_log_histogram();
  for (size_t b = 0; b < fine.size(); ++b) {
    if (fine[b] == 0) continue;
    double mid = std::sqrt(ProfilerReportData::LogBinLowerUs(static_cast<int>(b)) *
                           ProfilerReportData::LogBinLowerUs(static_cast<int>(b) + 1));
    counts[scale.BinOf(mid)] += fine[b];
  }
  return counts;
}

// The count grid (0 and 1-2-5 counts, skipping those too close to the
// previous label) and the y axis title.
std::string CountGrid(const Axis& x, const Axis& y, int64_t max_count) {
  std::vector<int64_t> count_ticks = {0};
  for (int64_t mag = 1; mag <= max_count; mag *= 10) {
    for (int64_t m : {1, 2, 5}) {
      int64_t t = m * mag;
      if (t > max_count) break;
      if (y(std::sqrt(static_cast<double>(count_ticks.back()))) -
              y(std::sqrt(static_cast<double>(t))) >=
          16) {
        count_ticks.push_back(t);
      }
    }
  }
  std::string s = "<g class=\"grid\">";
  for (int64_t t : count_ticks) {
    absl::StrAppend(&s, GridLine(x, y(std::sqrt(static_cast<double>(t))), FormatCount(t)));
  }
  absl::StrAppend(&s, "</g>\n", YAxisTitle("steps (√ scale)"));
  return s;
}

// A bar per non-empty bin, red where the bin holds an outlier step.
std::string HistogramBars(const std::vector<int64_t>& counts, const std::vector<bool>& outlier_bin,
                          const DurationScale& scale, const Axis& x, const Axis& y) {
  const double bw = (x.px1 - x.px0) / DurationScale::kBins;
  std::string s;
  for (int b = 0; b < DurationScale::kBins; ++b) {
    if (counts[b] == 0) continue;
    double top = y(std::sqrt(static_cast<double>(counts[b])));
    absl::StrAppend(&s, "<rect class=\"bar", outlier_bin[b] ? " outlier" : "", "\" x=\"",
                    SvgNumber(x.px0 + b * bw + 1), "\" y=\"", SvgNumber(top), "\" width=\"",
                    SvgNumber(bw - 2), "\" height=\"", SvgNumber(std::max(1.0, y.px0 - top)),
                    "\"><title>", EscapeHtml(FormatDurationUs(scale.Edge(b))), " – ",
                    EscapeHtml(FormatDurationUs(scale.Edge(b + 1))), ": ", FormatCount(counts[b]),
                    " step", counts[b] == 1 ? "" : "s", outlier_bin[b] ? " (outliers)" : "",
                    "</title></rect>\n");
  }
  return s;
}

// A marker above its bar per outlier step.
std::string OutlierMarkers(const std::map<int64_t, int64_t>& outlier_durations,
                           const std::vector<int64_t>& counts, const DurationScale& scale,
                           const Axis& x, const Axis& y) {
  std::string s;
  for (const auto& [step, d] : outlier_durations) {
    int b = scale.BinOf(static_cast<double>(d));
    double px = x.px0 + (scale.Position(static_cast<double>(d))) * (x.px1 - x.px0);
    double top = y(std::sqrt(static_cast<double>(counts[b]))) - 6;
    absl::StrAppend(&s, "<path class=\"outlier-marker\" d=\"M", SvgNumber(px - 5), " ",
                    SvgNumber(top - 8), "L", SvgNumber(px + 5), " ", SvgNumber(top - 8), "L",
                    SvgNumber(px), " ", SvgNumber(top), "Z\"><title>step ", step, ": ",
                    EscapeHtml(FormatDurationUs(static_cast<double>(d))), "</title></path>\n");
  }
  return s;
}

// The durations axis at `ay`.
std::string DurationAxis(const DurationScale& scale, const Axis& x, double ay) {
  std::string s = XAxisOpen(x, ay);
  for (double t : scale.Ticks()) {
    absl::StrAppend(&s, XAxisTick(x.px0 + scale.Position(t) * (x.px1 - x.px0), ay,
                                  EscapeHtml(FormatDurationUs(t))));
  }
  return s + XAxisClose(x, ay, scale.log_scale ? "step duration (log scale)" : "step duration");
}

// The outlier steps, with their durations where known (at most kMaxListed).
std::string OutlierList(const std::vector<int64_t>& outliers,
                        const std::map<int64_t, int64_t>& outlier_durations) {
  if (outliers.empty()) {
    return absl::StrCat("<p class=\"outliers none\">No outlier steps flagged by ", kOutlierRule,
                        ".</p>\n");
  }
  constexpr size_t kMaxListed = 200;
  std::vector<std::string> items;
  for (size_t i = 0; i < outliers.size() && i < kMaxListed; ++i) {
    auto it = outlier_durations.find(outliers[i]);
    items.push_back(absl::StrCat(
        "<li>step ", outliers[i],
        it == outlier_durations.end()
            ? ""
            : absl::StrCat(" <span class=\"dur\">",
                           EscapeHtml(FormatDurationUs(static_cast<double>(it->second))),
                           "</span>"),
        "</li>"));
  }
  return absl::StrCat("<div class=\"outliers\" id=\"outlier-steps\"><h3>",
                      FormatCount(static_cast<int64_t>(outliers.size())), " outlier step",
                      outliers.size() == 1 ? "" : "s", " flagged by ", kOutlierRule, "</h3><ul>",
                      absl::StrJoin(items, ""),
                      outliers.size() > kMaxListed
                          ? absl::StrCat("<li>and ", outliers.size() - kMaxListed, " more</li>")
                          : "",
                      "</ul></div>\n");
}

// --- Step duration by step -------------------------------------------------

// The step buckets with data: first and last index, and the largest max.
struct FilledSteps {
  int first = ProfilerReportData::kStepBuckets, last = -1;
  double max = 0;
};

FilledSteps FilledStepsOf(const Buckets& b) {
  FilledSteps filled;
  for (int i = 0; i < ProfilerReportData::kStepBuckets; ++i) {
    const Buckets::Cell& cell = b.cells()[i];
    if (cell.count == 0) continue;
    filled.first = std::min(filled.first, i);
    filled.last = std::max(filled.last, i);
    filled.max = std::max(filled.max, cell.max);
  }
  return filled;
}

// The bucket mean and max paths over the filled buckets.
std::string MeanAndMaxPaths(const Buckets& b, const FilledSteps& filled, const Axis& x,
                            const Axis& y) {
  std::string dmean, dmax;
  bool pen = false;
  for (int i = filled.first; i <= filled.last; ++i) {
    const Buckets::Cell& cell = b.cells()[i];
    if (cell.count == 0) {
      pen = false;
      continue;
    }
    double px = x(b.origin() + (i + 0.5) * b.width());
    absl::StrAppend(&dmean, pen ? "L" : "M", SvgNumber(px), " ",
                    SvgNumber(y(cell.sum / static_cast<double>(cell.count))));
    absl::StrAppend(&dmax, pen ? "L" : "M", SvgNumber(px), " ", SvgNumber(y(cell.max)));
    pen = true;
  }
  return absl::StrCat("<path class=\"series\" d=\"", dmax, "\" stroke=\"", kPalette[1],
                      "\" fill=\"none\" stroke-width=\"1.5\"><title>max</title></path>\n",
                      "<path class=\"series\" d=\"", dmean, "\" stroke=\"", kPalette[0],
                      "\" fill=\"none\" stroke-width=\"2\"><title>mean</title></path>\n");
}

// The step-number axis at `ay`.
std::string StepAxis(const Axis& x, double ay) {
  std::string s = absl::StrCat("\n", XAxisOpen(x, ay));
  double xstep = std::max(1.0, NiceStep(x.hi - x.lo, 8));
  for (double t = std::ceil(x.lo / xstep) * xstep; t <= x.hi; t += xstep) {
    absl::StrAppend(&s, XAxisTick(x(t), ay, FormatCount(static_cast<int64_t>(t))));
  }
  return s + XAxisClose(x, ay, "step");
}

}  // namespace

std::vector<const SeriesEntry*> SeriesOf(const SeriesMap& map, MetricDimension dim) {
  std::vector<const SeriesEntry*> out;
  for (const auto& entry : map) {
    if (entry.first.dim == dim && !entry.second.buckets.empty()) out.push_back(&entry);
  }
  return out;
}

std::set<std::string> Nodes(const ProfilerReportData& data) {
  std::set<std::string> nodes;
  for (const auto& [key, series] : data.node_series()) nodes.insert(key.node);
  return nodes;
}

int CountDevices(const ProfilerReportData& data, MetricDimension dim) {
  return static_cast<int>(SeriesOf(data.device_series(), dim).size());
}

std::vector<int64_t> OutlierSteps(const std::vector<ProfilerRuleFinding>& findings) {
  std::set<int64_t> steps;
  for (const ProfilerRuleFinding& f : findings) {
    if (f.rule == kOutlierRule) steps.insert(f.flagged_steps.begin(), f.flagged_steps.end());
  }
  return {steps.begin(), steps.end()};
}

std::vector<Reference> References(const std::vector<ProfilerRuleFinding>& findings,
                                  const std::vector<std::pair<std::string, std::string>>& which) {
  std::vector<Reference> out;
  for (const auto& [rule, param] : which) {
    for (const ProfilerRuleFinding& f : findings) {
      if (f.rule != rule) continue;
      if (auto v = Param(f, param)) out.push_back({*v, absl::StrCat(rule, " ", param)});
    }
  }
  return out;
}

ChartSection UtilizationChart(const ProfilerReportData& data, MetricDimension dim,
                              const std::string& id, const std::string& title, bool per_node_mean,
                              const std::vector<Reference>& refs,
                              const std::string& empty_message) {
  ChartSection c{id, title, "", ""};
  auto devices = SeriesOf(data.device_series(), dim);
  auto nodes = SeriesOf(data.node_series(), dim);
  if (nodes.empty()) {
    c.body = EmptyState(id, empty_message);
    return c;
  }
  bool multi_node = nodes.size() > 1;
  bool by_node = per_node_mean || devices.size() > 8 || devices.empty();
  std::vector<Buckets> buckets;
  std::vector<std::string> labels;
  for (const SeriesEntry* e : by_node ? nodes : devices) {
    buckets.push_back(e->second.buckets);
    labels.push_back(
        by_node      ? absl::StrCat(e->first.node, per_node_mean ? " (mean of cores)" : " (mean)")
        : multi_node ? absl::StrCat(e->first.node, " ", e->first.device)
                     : e->first.device);
  }
  TimeGrid g;
  std::vector<Line> lines = LinesOnCommonGrid(std::move(buckets), labels, &g);
  c.subtitle =
      absl::StrCat(by_node ? "Mean per node" : "Per device", "; each point is the mean of a ",
                   EscapeHtml(FormatSpan(g.width)), " bucket. ",
                   EscapeHtml(FormatCount(static_cast<int64_t>(devices.size()))), " device",
                   devices.size() == 1 ? "" : "s", " on ", nodes.size(), " node",
                   nodes.size() == 1 ? "" : "s", ".");
  c.body = LineChartSvg(id, title, std::move(lines), g, refs, "utilization");
  return c;
}

ChartSection HostChart(const ProfilerReportData& data, const std::vector<Reference>& refs) {
  const std::string id = "chart-host";
  ChartSection c{id, "Host memory and I/O wait", "", ""};
  auto mem = SeriesOf(data.node_series(), MetricDimension::kMemoryUsedPercent);
  auto io = SeriesOf(data.node_series(), MetricDimension::kIoWaitPercentage);
  if (mem.empty() && io.empty()) {
    c.body = EmptyState(id, "No host memory or I/O wait metrics recorded.");
    return c;
  }
  std::vector<Buckets> buckets;
  std::vector<std::string> labels;
  for (const SeriesEntry* e : mem) {
    buckets.push_back(e->second.buckets);
    labels.push_back(absl::StrCat(e->first.node, " memory used"));
  }
  for (const SeriesEntry* e : io) {
    buckets.push_back(e->second.buckets);
    labels.push_back(absl::StrCat(e->first.node, " I/O wait"));
  }
  TimeGrid g;
  std::vector<Line> lines = LinesOnCommonGrid(std::move(buckets), labels, &g);
  c.subtitle = "Percent of host memory used and of CPU time waiting for I/O, per node.";
  c.body = LineChartSvg(id, c.title, std::move(lines), g, refs, "percent");
  return c;
}

ChartSection Heatmap(const ProfilerReportData& data) {
  const std::string id = "chart-heatmap";
  ChartSection c{id, "Utilization heatmap", "", ""};
  constexpr int kMaxRows = 64;
  std::vector<HeatmapRow> rows;
  const bool multi_node = Nodes(data).size() > 1;
  AddHeatmapRows(data.device_series(), /*by_node=*/false, multi_node, &rows);
  bool by_node = false;
  if (static_cast<int>(rows.size()) > kMaxRows) {
    rows.clear();
    AddHeatmapRows(data.node_series(), /*by_node=*/true, multi_node, &rows);
    by_node = true;
  }
  if (rows.empty()) {
    c.body = EmptyState(id, "No CPU or GPU utilization metrics recorded.");
    return c;
  }
  int hidden = 0;
  if (static_cast<int>(rows.size()) > kMaxRows) {
    hidden = static_cast<int>(rows.size()) - kMaxRows;
    rows.erase(rows.begin() + kMaxRows, rows.end());
  }
  std::vector<Buckets> buckets;
  buckets.reserve(rows.size());
  for (HeatmapRow& r : rows) buckets.push_back(std::move(r.buckets));
  const TimeGrid g = CommonGrid(buckets);
  const double row_h = std::clamp(360.0 / static_cast<double>(rows.size()), 9.0, 22.0);
  const double label_w = 120;
  const double top = kTop, grid_h = row_h * static_cast<double>(rows.size());
  const Axis x{g.origin + g.first * g.width, g.origin + (g.last + 1) * g.width, label_w,
               kChartWidth - 24};
  std::string s = SvgOpen(id, top + grid_h + 40 + 44, c.title);
  for (size_t r = 0; r < rows.size(); ++r) {
    s += HeatmapRowSvg(rows[r].label, buckets[r], g, x, label_w,
                       top + static_cast<double>(r) * row_h, row_h);
  }
  absl::StrAppend(&s, TimeAxis(x, top + grid_h + 2), HeatmapLegend(label_w, top + grid_h + 52),
                  "</svg>\n");
  c.body = s;
  c.subtitle = absl::StrCat(by_node ? "Mean utilization per node" : "Mean utilization per device",
                            " (rows) per ", EscapeHtml(FormatSpan(g.width)), " bucket (columns).",
                            hidden ? absl::StrCat(" ", hidden, " more rows not shown.") : "");
  return c;
}

ChartSection StepHistogram(const ProfilerReportData& data,
                           const std::vector<ProfilerRuleFinding>& findings) {
  const std::string id = "chart-step-histogram";
  ChartSection c{id, "Step duration histogram", "", ""};
  if (data.step_events() == 0) {
    c.body = EmptyState(id,
                        "No training steps recorded yet — framework profiling may be off, or "
                        "no step has finished.");
    return c;
  }
  const DurationScale scale(data);
  const std::vector<int64_t> counts = StepsPerBin(data, scale);
  const std::vector<int64_t> outliers = OutlierSteps(findings);
  const std::map<int64_t, int64_t> outlier_durations = data.DurationsOfSteps(outliers);
  std::vector<bool> outlier_bin(DurationScale::kBins, false);
  for (const auto& [step, d] : outlier_durations) {
    outlier_bin[scale.BinOf(static_cast<double>(d))] = true;
  }
  constexpr double kHeight = 300;
  const Axis x{0, 1, kLeft + 10, kChartWidth - kRight};
  const int64_t max_count = *std::max_element(counts.begin(), counts.end());
  // Square-root counts so a dozen outliers stay visible next to thousands of
  // normal steps.
  const Axis y{0, std::sqrt(static_cast<double>(std::max<int64_t>(1, max_count))),
               kHeight - kBottom, kTop + 8};
  // Mean and, with StepOutlier's stddev, its threshold are not drawn: the
  // rule computes them per mode and node; the list below names its verdict.
  const std::string svg = absl::StrCat(SvgOpen(id, kHeight, c.title), CountGrid(x, y, max_count),
                                       HistogramBars(counts, outlier_bin, scale, x, y),
                                       OutlierMarkers(outlier_durations, counts, scale, x, y),
                                       DurationAxis(scale, x, kHeight - kBottom), "</svg>\n");
  const std::string legend =
      LegendHtml({{"steps", "#4e79a7"}, {"bins with outlier steps", "#e15759"}});
  c.subtitle =
      absl::StrCat(FormatCount(data.step_events()), " step events; median ",
                   EscapeHtml(FormatDurationUs(data.StepQuantileUs(0.5))), ", p95 ",
                   EscapeHtml(FormatDurationUs(data.StepQuantileUs(0.95))), ", max ",
                   EscapeHtml(FormatDurationUs(static_cast<double>(data.step_max_us()))), ".");
  c.body = svg + legend + OutlierList(outliers, outlier_durations);
  return c;
}

ChartSection StepTimeline(const ProfilerReportData& data,
                          const std::vector<ProfilerRuleFinding>& findings) {
  const std::string id = "chart-step-timeline";
  ChartSection c{id, "Step duration by step", "", ""};
  const Buckets& b = data.step_buckets();
  if (b.empty()) {
    c.body = EmptyState(id, "No training steps recorded yet.");
    return c;
  }
  const FilledSteps filled = FilledStepsOf(b);
  constexpr double kHeight = 260;
  const double ystep = NiceStep(std::max(1.0, filled.max), 4);
  const double ytop = std::ceil(std::max(1.0, filled.max) / ystep) * ystep;
  const Axis x{b.origin() + filled.first * b.width(), b.origin() + (filled.last + 1) * b.width(),
               kLeft + 10, kChartWidth - kRight};
  const Axis y{0, ytop, kHeight - kBottom, kTop};
  std::string s = SvgOpen(id, kHeight, c.title) + "<g class=\"grid\">";
  for (double t = 0; t <= ytop + 1e-9; t += ystep) {
    absl::StrAppend(&s, GridLine(x, y(t), EscapeHtml(FormatDurationUs(t))));
  }
  absl::StrAppend(&s, "</g>\n", MeanAndMaxPaths(b, filled, x, y));
  for (const auto& [step, d] : data.DurationsOfSteps(OutlierSteps(findings))) {
    absl::StrAppend(&s, "<circle class=\"outlier-dot\" cx=\"",
                    SvgNumber(x(static_cast<double>(step) + 0.5)), "\" cy=\"",
                    SvgNumber(y(static_cast<double>(d))), "\" r=\"4\"><title>step ", step, ": ",
                    EscapeHtml(FormatDurationUs(static_cast<double>(d))), "</title></circle>");
  }
  absl::StrAppend(&s, StepAxis(x, kHeight - kBottom), "</svg>\n");
  c.subtitle =
      absl::StrCat("Mean and maximum step duration per ",
                   b.width() == 1 ? "step" : absl::StrCat(SvgNumber(b.width()), " steps"), ".");
  c.body =
      s + LegendHtml({{"mean", kPalette[0]}, {"max", kPalette[1]}, {"outlier step", "#e15759"}});
  return c;
}

}  // namespace debugplane::rules_engine::profiler_report_internal
