#include "rules_engine/report/svg_charts.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/utc_time.h"
#include "rules_engine/report/report_text.h"

namespace debugplane::rules_engine::profiler_report_internal {
namespace {

// Time ticks at round clock times (UTC) for the range.
std::vector<std::pair<double, std::string>> TimeTicks(double lo, double hi) {
  static constexpr double kSteps[] = {1,     2,     5,      10,     15,      30,     60,    120,
                                      300,   600,   900,    1800,   3600,    7200,   10800, 21600,
                                      43200, 86400, 172800, 604800, 1209600, 2592000};
  double range = std::max(1.0, hi - lo);
  double step = kSteps[sizeof(kSteps) / sizeof(kSteps[0]) - 1];
  for (double s : kSteps) {
    if (range / s <= 8) {
      step = s;
      break;
    }
  }
  const char* format = step < 60 ? "%H:%M:%S" : (range < 86400 ? "%H:%M" : "%b %d %H:%M");
  if (step >= 86400) format = "%b %d";
  std::vector<std::pair<double, std::string>> ticks;
  for (double t = std::ceil(lo / step) * step; t <= hi + 1e-9; t += step) {
    ticks.emplace_back(t, base::FormatUtc(TimeOfSeconds(t), format));
  }
  return ticks;
}

// The path through `y`'s values over the grid, lifting the pen over gaps.
std::string Path(const std::vector<std::optional<double>>& y, const TimeGrid& g, const Axis& x,
                 const Axis& yaxis) {
  std::string d;
  bool pen = false;
  for (int i = g.first; i <= g.last; ++i) {
    if (!y[i]) {
      pen = false;
      continue;
    }
    double px = x(g.origin + (i + 0.5) * g.width);
    absl::StrAppend(&d, pen ? "L" : "M", SvgNumber(px), " ", SvgNumber(yaxis(*y[i])));
    pen = true;
  }
  return d;
}

// The 0-100% grid with its labels, and the y axis title.
std::string PercentGrid(const Axis& x, const Axis& y, const std::string& unit_title) {
  std::string s = "<g class=\"grid\">";
  for (int v = 0; v <= 100; v += 25) absl::StrAppend(&s, GridLine(x, y(v), absl::StrCat(v, "%")));
  absl::StrAppend(&s, "</g>\n", YAxisTitle(EscapeHtml(unit_title)));
  return s;
}

// Too many lines to tell apart: the mean over the lines, and (drawn into
// `*svg`, named in `*legend`) the band of their range.
Line MeanWithBand(const std::vector<Line>& lines, const TimeGrid& g, const Axis& x, const Axis& y,
                  std::string* svg, std::vector<std::pair<std::string, std::string>>* legend) {
  const int n = static_cast<int>(lines.size());
  Line mean{absl::StrCat("mean of ", n), {}};
  mean.y.resize(ProfilerReportData::kTimeBuckets);
  std::vector<std::pair<double, std::pair<double, double>>> band;  // px, (y(lo), y(hi)).
  for (int i = g.first; i <= g.last; ++i) {
    double sum = 0, lo = 0, hi = 0;
    int k = 0;
    for (const Line& l : lines) {
      if (!l.y[i]) continue;
      lo = k ? std::min(lo, *l.y[i]) : *l.y[i];
      hi = k ? std::max(hi, *l.y[i]) : *l.y[i];
      sum += *l.y[i];
      ++k;
    }
    if (k == 0) continue;
    mean.y[i] = sum / k;
    band.push_back({x(g.origin + (i + 0.5) * g.width), {y(lo), y(hi)}});
  }
  if (band.empty()) return mean;
  std::string d;
  for (size_t i = 0; i < band.size(); ++i) {
    absl::StrAppend(&d, i ? "L" : "M", SvgNumber(band[i].first), " ",
                    SvgNumber(band[i].second.second));
  }
  for (size_t i = band.size(); i-- > 0;) {
    absl::StrAppend(&d, "L", SvgNumber(band[i].first), " ", SvgNumber(band[i].second.first));
  }
  absl::StrAppend(svg, "<path class=\"band\" d=\"", d, "Z\" fill=\"", kPalette[0],
                  "\" fill-opacity=\"0.18\" stroke=\"none\"><title>range over ", n,
                  "</title></path>\n");
  legend->push_back({absl::StrCat("range over ", n), "rgba(78,121,167,0.3)"});
  return mean;
}

// A line's path, and a dot for each isolated bucket (it has no segment).
std::string SeriesPath(const Line& line, const char* color, const TimeGrid& g, const Axis& x,
                       const Axis& y) {
  std::string s =
      absl::StrCat("<path class=\"series\" d=\"", Path(line.y, g, x, y), "\" stroke=\"", color,
                   "\" fill=\"none\" stroke-width=\"2\" stroke-linejoin=\"round\"><title>",
                   EscapeHtml(line.label), "</title></path>\n");
  for (int b = g.first; b <= g.last; ++b) {
    bool prev = b > g.first && line.y[b - 1];
    bool next = b < g.last && line.y[b + 1];
    if (line.y[b] && !prev && !next) {
      absl::StrAppend(&s, "<circle cx=\"", SvgNumber(x(g.origin + (b + 0.5) * g.width)), "\" cy=\"",
                      SvgNumber(y(*line.y[b])), "\" r=\"2.5\" fill=\"", color, "\"/>");
    }
  }
  return s;
}

// Threshold lines, labelled inside the plot at the right end, above the
// line; labels nudged apart when values are close.
std::string ThresholdLines(const std::vector<Reference>& refs, const Axis& x, const Axis& y) {
  std::vector<Reference> sorted = refs;
  std::sort(sorted.begin(), sorted.end(),
            [](const Reference& a, const Reference& b) { return a.value > b.value; });
  std::string s;
  double last_label_y = -1e9;
  for (const Reference& r : sorted) {
    double py = y(std::clamp(r.value, 0.0, 100.0));
    double ly = std::max(py - 5, last_label_y + 14);
    last_label_y = ly;
    absl::StrAppend(&s, "<g class=\"threshold\"><line x1=\"", SvgNumber(x.px0), "\" y1=\"",
                    SvgNumber(py), "\" x2=\"", SvgNumber(x.px1), "\" y2=\"", SvgNumber(py),
                    "\"/><text x=\"", SvgNumber(x.px1 - 4), "\" y=\"", SvgNumber(ly),
                    "\" text-anchor=\"end\">", EscapeHtml(r.label), " ",
                    EscapeHtml(SvgNumber(r.value)), "%</text></g>\n");
  }
  return s;
}

}  // namespace

double NiceStep(double range, int target) {
  double raw = range / std::max(1, target);
  double mag = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * mag >= raw) return m * mag;
  }
  return 10 * mag;
}

std::string Section(const ChartSection& chart) {
  return absl::StrCat(
      "<section class=\"card chart-card\" id=\"", chart.id, "-section\"><h2>",
      EscapeHtml(chart.title), "</h2>",
      chart.subtitle.empty() ? "" : absl::StrCat("<p class=\"sub\">", chart.subtitle, "</p>"), "\n",
      chart.body, "</section>\n");
}

std::string EmptyState(const std::string& id, const std::string& message) {
  return absl::StrCat("<div class=\"empty-state\" id=\"", id, "-empty\">", EscapeHtml(message),
                      "</div>\n");
}

std::string SvgOpen(const std::string& id, double height, const std::string& label) {
  return absl::StrCat("<svg class=\"chart\" id=\"", id, "\" viewBox=\"0 0 ", SvgNumber(kChartWidth),
                      " ", SvgNumber(height),
                      "\" preserveAspectRatio=\"xMidYMid meet\" role=\"img\" ", "aria-label=\"",
                      EscapeHtml(label), "\" xmlns=\"http://www.w3.org/2000/svg\">\n");
}

std::string LegendHtml(const std::vector<std::pair<std::string, std::string>>& items) {
  std::string s = "<div class=\"legend\">";
  for (const auto& [label, color] : items) {
    absl::StrAppend(&s,
                    "<span class=\"legend-item\"><span class=\"swatch\" style=\"background:", color,
                    "\"></span>", EscapeHtml(label), "</span>");
  }
  return s + "</div>\n";
}

std::string GridLine(const Axis& x, double py, absl::string_view label_html) {
  return absl::StrCat("<line x1=\"", SvgNumber(x.px0), "\" y1=\"", SvgNumber(py), "\" x2=\"",
                      SvgNumber(x.px1), "\" y2=\"", SvgNumber(py), "\"/><text class=\"tick\" x=\"",
                      SvgNumber(x.px0 - 6), "\" y=\"", SvgNumber(py + 4), "\" text-anchor=\"end\">",
                      label_html, "</text>");
}

std::string YAxisTitle(absl::string_view title_html) {
  return absl::StrCat("<text class=\"axis-title\" x=\"12\" y=\"", SvgNumber(kTop + 120),
                      "\" transform=\"rotate(-90 12 ", SvgNumber(kTop + 120),
                      ")\" text-anchor=\"middle\">", title_html, "</text>\n");
}

std::string XAxisOpen(const Axis& x, double y) {
  return absl::StrCat("<g class=\"axis x-axis\"><line x1=\"", SvgNumber(x.px0), "\" y1=\"",
                      SvgNumber(y), "\" x2=\"", SvgNumber(x.px1), "\" y2=\"", SvgNumber(y), "\"/>");
}

std::string XAxisTick(double px, double y, absl::string_view label_html) {
  return absl::StrCat("<line x1=\"", SvgNumber(px), "\" y1=\"", SvgNumber(y), "\" x2=\"",
                      SvgNumber(px), "\" y2=\"", SvgNumber(y + 5), "\"/><text x=\"", SvgNumber(px),
                      "\" y=\"", SvgNumber(y + 18), "\" text-anchor=\"middle\">", label_html,
                      "</text>");
}

std::string XAxisClose(const Axis& x, double y, absl::string_view title_html) {
  return absl::StrCat("<text class=\"axis-title\" x=\"", SvgNumber(x.px1), "\" y=\"",
                      SvgNumber(y + 34), "\" text-anchor=\"end\">", title_html, "</text></g>\n");
}

std::string TimeAxis(const Axis& x, double y) {
  std::string s = XAxisOpen(x, y);
  for (const auto& [t, label] : TimeTicks(x.lo, x.hi)) {
    absl::StrAppend(&s, XAxisTick(x(t), y, EscapeHtml(label)));
  }
  return s + XAxisClose(x, y, "time (UTC)");
}

TimeGrid CommonGrid(std::vector<Buckets>& series) {
  TimeGrid g;
  double width = 0, lo = 0, hi = 0;
  bool any = false;
  for (const Buckets& b : series) {
    if (b.empty()) continue;
    width = std::max(width, b.width());
    lo = any ? std::min(lo, b.min_x()) : b.min_x();
    hi = any ? std::max(hi, b.max_x()) : b.max_x();
    any = true;
  }
  if (!any) return g;
  // Expanding may double the width again; repeat until all agree.
  for (int round = 0; round < 64; ++round) {
    for (Buckets& b : series) b.ExpandTo(width, lo, hi);
    double w = width;
    for (const Buckets& b : series) {
      if (!b.empty()) w = std::max(w, b.width());
    }
    if (w == width) break;
    width = w;
  }
  for (const Buckets& b : series) {
    if (b.empty()) continue;
    g.origin = b.origin();
    g.width = b.width();
    break;
  }
  g.first = ProfilerReportData::kTimeBuckets;
  for (const Buckets& b : series) {
    if (b.empty()) continue;
    for (int i = 0; i < ProfilerReportData::kTimeBuckets; ++i) {
      if (b.cells()[i].count == 0) continue;
      g.first = std::min(g.first, i);
      g.last = std::max(g.last, i);
    }
  }
  return g;
}

std::vector<std::optional<double>> Means(const Buckets& buckets) {
  std::vector<std::optional<double>> y(ProfilerReportData::kTimeBuckets);
  if (buckets.empty()) return y;
  for (int i = 0; i < ProfilerReportData::kTimeBuckets; ++i) {
    const Buckets::Cell& c = buckets.cells()[i];
    if (c.count) y[i] = c.sum / static_cast<double>(c.count);
  }
  return y;
}

std::string LineChartSvg(const std::string& id, const std::string& title, std::vector<Line> lines,
                         const TimeGrid& grid, const std::vector<Reference>& refs,
                         const std::string& unit_title) {
  constexpr double kHeight = 300;
  const TimeGrid& g = grid;
  Axis x{g.origin + g.first * g.width, g.origin + (g.last + 1) * g.width, kLeft,
         kChartWidth - kRight};
  Axis y{0, 100, kHeight - kBottom, kTop};
  std::string s = SvgOpen(id, kHeight, title);
  absl::StrAppend(&s, PercentGrid(x, y, unit_title), TimeAxis(x, kHeight - kBottom));
  std::vector<std::pair<std::string, std::string>> legend;
  if (static_cast<int>(lines.size()) > kMaxLines) {
    lines = {MeanWithBand(lines, g, x, y, &s, &legend)};
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    const char* color = kPalette[i % kPaletteSize];
    s += SeriesPath(lines[i], color, g, x, y);
    legend.push_back({lines[i].label, color});
  }
  s += ThresholdLines(refs, x, y);
  s += "</svg>\n";
  return s + LegendHtml(legend);
}

}  // namespace debugplane::rules_engine::profiler_report_internal
