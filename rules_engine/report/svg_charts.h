// The report's chart kit: server-side SVG for line charts over time buckets,
// axes, grids, legends and empty states, in the page's classes (the CSS is in
// report_html.cc). Every label argument is plain text unless it says HTML;
// the kit escapes what it is given as text. Internal to rules_engine/report/.

#ifndef DEBUGPLANE_RULES_ENGINE_REPORT_SVG_CHARTS_H_
#define DEBUGPLANE_RULES_ENGINE_REPORT_SVG_CHARTS_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "rules_engine/report/profiler_report.h"

namespace debugplane::rules_engine::profiler_report_internal {

// Tableau 10: distinguishable, colour-blind friendlier than the defaults.
inline constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                           "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
inline constexpr int kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);
// Viridis in 10 steps: perceptually uniform, readable in grey.
inline constexpr const char* kHeat[] = {"#440154", "#482878", "#3e4989", "#31688e", "#26828e",
                                        "#1f9e89", "#35b779", "#6ece58", "#b5de2b", "#fde725"};
inline constexpr int kHeatLevels = 10;

// Chart geometry (SVG user units): the width, and the plot's margins.
inline constexpr double kChartWidth = 960;
inline constexpr double kLeft = 56, kRight = 24, kTop = 16, kBottom = 40;

// Maps the data range [lo, hi] onto the pixel range [px0, px1] (the middle
// when the data range is empty).
struct Axis {
  double lo, hi;    // Data range.
  double px0, px1;  // Pixel range.
  double operator()(double v) const {
    if (hi <= lo) return (px0 + px1) / 2;
    return px0 + (v - lo) / (hi - lo) * (px1 - px0);
  }
};

// A round step (1, 2, 2.5, 5 x 10^k) giving about `target` steps over `range`.
double NiceStep(double range, int target);

// A dashed horizontal threshold line.
struct Reference {
  double value;
  std::string label;
};

// A chart's card: the section's id is "<id>-section"; `subtitle` and `body`
// are HTML.
struct ChartSection {
  std::string id, title, subtitle, body;
};
std::string Section(const ChartSection& chart);

// <div class="empty-state" id="<id>-empty"> saying `message`.
std::string EmptyState(const std::string& id, const std::string& message);
// The opening <svg class="chart" id=...> of a chart `height` high.
std::string SvgOpen(const std::string& id, double height, const std::string& label);
// (label, colour) swatches under a chart.
std::string LegendHtml(const std::vector<std::pair<std::string, std::string>>& items);

// Grid and axes. A grid line across the plot at `py` with its tick label
// (HTML) left of the plot.
std::string GridLine(const Axis& x, double py, absl::string_view label_html);
// The rotated title of the y axis (HTML).
std::string YAxisTitle(absl::string_view title_html);
// The x axis at `y`: XAxisOpen, then an XAxisTick per tick, then XAxisClose
// with the axis title (HTML) at the right end.
std::string XAxisOpen(const Axis& x, double y);
std::string XAxisTick(double px, double y, absl::string_view label_html);
std::string XAxisClose(const Axis& x, double y, absl::string_view title_html);
// The x axis of time in seconds, ticks at round UTC clock times.
std::string TimeAxis(const Axis& x, double y);

// Series over time buckets, on one grid.
struct TimeGrid {
  double origin = 0, width = 1;
  int first = 0, last = -1;  // Non-empty bucket range.
};
// Regrids `series` to one common grid (the widest), so that their buckets
// line up; the grid and the range of buckets any of them fills.
TimeGrid CommonGrid(std::vector<Buckets>& series);
// The mean of each bucket (none for an empty one).
std::vector<std::optional<double>> Means(const Buckets& buckets);

// A line of a line chart: a value (or none) per bucket of the common grid.
struct Line {
  std::string label;
  std::vector<std::optional<double>> y;
};
// A 0-100% line chart of `lines` over `grid` with threshold lines `refs`;
// above kMaxLines lines it draws their mean and their min-max band. The
// <svg> and its legend.
inline constexpr int kMaxLines = 10;
std::string LineChartSvg(const std::string& id, const std::string& title, std::vector<Line> lines,
                         const TimeGrid& grid, const std::vector<Reference>& refs,
                         const std::string& unit_title);

}  // namespace debugplane::rules_engine::profiler_report_internal

#endif  // DEBUGPLANE_RULES_ENGINE_REPORT_SVG_CHARTS_H_
