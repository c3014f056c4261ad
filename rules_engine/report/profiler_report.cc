#include "rules_engine/report/profiler_report.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace debugplane::rules_engine {

namespace profiler_report_internal {

// --- Buckets -------------------------------------------------------------

Buckets::Buckets(int num_buckets, double base_width)
    : num_buckets_(num_buckets), width_(base_width) {}

void Buckets::Add(double x, double value) {
  if (!std::isfinite(x) || !std::isfinite(value)) return;
  if (count_ == 0) {
    cells_.assign(num_buckets_, Cell{});
    origin_ = std::floor(x / width_) * width_;
    min_x_ = max_x_ = x;
  } else {
    min_x_ = std::min(min_x_, x);
    max_x_ = std::max(max_x_, x);
  }
  if (x < origin_ || x >= origin_ + num_buckets_ * width_) Regrid(min_x_, max_x_);
  int i = static_cast<int>(std::floor((x - origin_) / width_));
  i = std::clamp(i, 0, num_buckets_ - 1);
  Cell& c = cells_[i];
  if (c.count == 0) {
    c.min = c.max = value;
  } else {
    c.min = std::min(c.min, value);
    c.max = std::max(c.max, value);
  }
  c.sum += value;
  ++c.count;
  ++count_;
}

void Buckets::ExpandTo(double width, double lo, double hi) {
  if (count_ == 0) return;
  double w = width_;
  while (w < width) w *= 2;
  if (w == width_ && lo >= origin_ && hi < origin_ + num_buckets_ * width_) return;
  // Regrid doubles from width_; start it at w.
  std::vector<Cell> old = std::move(cells_);
  double old_origin = origin_, old_width = width_;
  width_ = w;
  origin_ = std::floor(old_origin / w) * w;
  cells_.assign(num_buckets_, Cell{});
  for (int i = 0; i < num_buckets_; ++i) {
    if (old[i].count == 0) continue;
    double center = old_origin + (i + 0.5) * old_width;
    int j = std::clamp(static_cast<int>(std::floor((center - origin_) / w)), 0, num_buckets_ - 1);
    Cell& c = cells_[j];
    if (c.count == 0) {
      c = old[i];
    } else {
      c.sum += old[i].sum;
      c.count += old[i].count;
      c.min = std::min(c.min, old[i].min);
      c.max = std::max(c.max, old[i].max);
    }
  }
  Regrid(std::min(lo, min_x_), std::max(hi, max_x_));
}

void Buckets::Regrid(double lo, double hi) {
  double w = width_;
  // Edges at multiples of w: a coarser grid's bucket holds whole old buckets.
  while (std::floor(lo / w) * w + num_buckets_ * w <= hi) w *= 2;
  double origin = std::floor(lo / w) * w;
  if (w == width_ && origin == origin_) return;
  std::vector<Cell> merged(num_buckets_);
  for (int i = 0; i < num_buckets_; ++i) {
    const Cell& o = cells_[i];
    if (o.count == 0) continue;
    double center = origin_ + (i + 0.5) * width_;
    int j = std::clamp(static_cast<int>(std::floor((center - origin) / w)), 0, num_buckets_ - 1);
    Cell& c = merged[j];
    if (c.count == 0) {
      c = o;
    } else {
      c.sum += o.sum;
      c.count += o.count;
      c.min = std::min(c.min, o.min);
      c.max = std::max(c.max, o.max);
    }
  }
  cells_ = std::move(merged);
  width_ = w;
  origin_ = origin;
}

// --- PercentHistogram ----------------------------------------------------

namespace {
// 100 / resolution is positive, so adding 0.5 rounds it (std::lround is not
// constexpr).
// NOLINTNEXTLINE(bugprone-incorrect-roundings)
constexpr int kPercentSteps = static_cast<int>(100 / ProfilerReportData::kValueResolution + 0.5);
constexpr int kPercentBins = kPercentSteps + 1;
}  // namespace

void PercentHistogram::Add(double value) {
  if (!std::isfinite(value)) return;
  if (bins_.empty()) bins_.assign(kPercentBins, 0);
  int bin = static_cast<int>(std::lround(value / ProfilerReportData::kValueResolution));
  ++bins_[std::clamp(bin, 0, kPercentBins - 1)];
  if (count_ == 0) {
    min_ = max_ = value;
  } else {
    min_ = std::min(min_, value);
    max_ = std::max(max_, value);
  }
  sum_ += value;
  ++count_;
}

double PercentHistogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  int64_t rank =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(q * static_cast<double>(count_))));
  int64_t seen = 0;
  for (int i = 0; i < kPercentBins; ++i) {
    seen += bins_[i];
    if (seen >= rank) {
      return std::clamp(i * ProfilerReportData::kValueResolution, min_, max_);
    }
  }
  return max_;
}

}  // namespace profiler_report_internal

namespace {

using profiler_report_internal::Buckets;

// The only places that read SystemMetricPoint's device and node fields, so a
// change of their representation is adapted here.
absl::string_view DeviceOf(const SystemMetricPoint& p) { return p.name; }
absl::string_view NodeOf(const SystemMetricPoint& p) { return p.node_id; }

constexpr int kLogDecades = 10;  // 1 us .. 10^10 us (2.8 hours) per step.
constexpr int kLogBins = kLogDecades * ProfilerReportData::kLogBinsPerDecade;

int LogBinOf(int64_t duration_us) {
  double d = std::max<double>(1.0, static_cast<double>(duration_us));
  int bin = static_cast<int>(std::floor(std::log10(d) * ProfilerReportData::kLogBinsPerDecade));
  return std::clamp(bin, 0, kLogBins - 1);
}

}  // namespace

// --- ProfilerReportData ----------------------------------------------------

ProfilerReportData::ProfilerReportData() : step_log_bins_(kLogBins, 0) {}

ProfilerReportData::Series* ProfilerReportData::FindSeries(std::map<SeriesKey, Series>& map,
                                                           int cap, MetricDimension dim,
                                                           const std::string& node,
                                                           const std::string& device) {
  SeriesKey key{dim, node, device};
  auto it = map.find(key);
  if (it != map.end()) return &it->second;
  if (static_cast<int>(map.size()) >= cap) return nullptr;
  return &map.emplace(std::move(key), Series{}).first->second;
}

void ProfilerReportData::AddMetrics(absl::Span<const SystemMetricPoint> points) {
  std::string node, device;
  for (const SystemMetricPoint& p : points) {
    if (!std::isfinite(p.timestamp) || !std::isfinite(p.value)) continue;
    if (metric_points_ == 0) {
      first_ts_ = last_ts_ = p.timestamp;
    } else {
      first_ts_ = std::min(first_ts_, p.timestamp);
      last_ts_ = std::max(last_ts_, p.timestamp);
    }
    ++metric_points_;
    if (p.dim == MetricDimension::kOther) continue;
    node.assign(NodeOf(p).data(), NodeOf(p).size());
    device.assign(DeviceOf(p).data(), DeviceOf(p).size());
    if (Series* s = FindSeries(devices_, kMaxDeviceSeries, p.dim, node, device)) {
      s->buckets.Add(p.timestamp, p.value);
      s->values.Add(p.value);
    } else {
      ++dropped_device_points_;
    }
    if (Series* s = FindSeries(nodes_, kMaxNodes, p.dim, node, "")) {
      s->buckets.Add(p.timestamp, p.value);
      s->values.Add(p.value);
    }
  }
}

void ProfilerReportData::AddFrameworkEvents(absl::Span<const FrameworkEvent> events) {
  for (const FrameworkEvent& e : events) {
    std::string mode = StepEventMode(e.name);
    if (mode.empty()) continue;
    int64_t d = std::max<int64_t>(0, e.duration_us);
    int64_t step = e.step >= 0 ? e.step : step_events_;
    if (step_events_ == 0) {
      step_min_ = step_max_ = d;
    } else {
      step_min_ = std::min(step_min_, d);
      step_max_ = std::max(step_max_, d);
    }
    ++step_events_;
    step_sum_us_ += static_cast<double>(d);
    ++step_log_bins_[LogBinOf(d)];
    ++step_modes_[mode];
    step_buckets_.Add(static_cast<double>(step), static_cast<double>(d));
    if (steps_exact_) {
      if (step_events_ <= kMaxExactSteps) {
        step_durations_.push_back(d);
        step_numbers_.push_back(step);
      } else {
        // Past the cap the histogram answers; free the exact values.
        steps_exact_ = false;
        std::vector<int64_t>().swap(step_durations_);
        std::vector<int64_t>().swap(step_numbers_);
      }
    }
    if (static_cast<int>(slowest_.size()) < kSlowestSteps || d > slowest_.back().duration_us) {
      StepRecord r{step, d, mode, e.node_id};
      auto pos = std::upper_bound(
          slowest_.begin(), slowest_.end(), r,
          [](const StepRecord& a, const StepRecord& b) { return a.duration_us > b.duration_us; });
      slowest_.insert(pos, std::move(r));
      if (static_cast<int>(slowest_.size()) > kSlowestSteps) slowest_.pop_back();
    }
  }
}

bool ProfilerReportData::empty() const { return metric_points_ == 0 && step_events_ == 0; }
int64_t ProfilerReportData::metric_points() const { return metric_points_; }
int64_t ProfilerReportData::step_events() const { return step_events_; }

double ProfilerReportData::step_mean_us() const {
  return step_events_ ? step_sum_us_ / static_cast<double>(step_events_) : 0;
}

double ProfilerReportData::LogBinLowerUs(int bin) {
  return std::pow(10.0, static_cast<double>(bin) / kLogBinsPerDecade);
}

double ProfilerReportData::StepQuantileUs(double q) const {
  if (step_events_ == 0) return 0;
  int64_t rank =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(q * static_cast<double>(step_events_))));
  if (steps_exact_) {
    std::vector<int64_t> sorted = step_durations_;
    std::nth_element(sorted.begin(), sorted.begin() + (rank - 1), sorted.end());
    return static_cast<double>(sorted[rank - 1]);
  }
  int64_t seen = 0;
  for (int i = 0; i < kLogBins; ++i) {
    seen += step_log_bins_[i];
    if (seen >= rank) {
      // The bin's geometric midpoint.
      double mid = std::pow(10.0, (i + 0.5) / kLogBinsPerDecade);
      return std::clamp(mid, static_cast<double>(step_min_), static_cast<double>(step_max_));
    }
  }
  return static_cast<double>(step_max_);
}

std::map<int64_t, int64_t> ProfilerReportData::DurationsOfSteps(
    const std::vector<int64_t>& steps) const {
  std::map<int64_t, int64_t> out;
  if (steps.empty()) return out;
  std::set<int64_t> wanted(steps.begin(), steps.end());
  // The longest event of a step, when several nodes or modes report it.
  auto note = [&](int64_t step, int64_t d) {
    if (!wanted.count(step)) return;
    auto [it, inserted] = out.emplace(step, d);
    if (!inserted) it->second = std::max(it->second, d);
  };
  if (steps_exact_) {
    for (size_t i = 0; i < step_durations_.size(); ++i) note(step_numbers_[i], step_durations_[i]);
  } else {
    for (const StepRecord& r : slowest_) note(r.step, r.duration_us);
  }
  return out;
}

std::string ProfilerRuleStatusName(RuleVerdict::Kind kind) {
  switch (kind) {
    case RuleVerdict::Kind::kContinue:
      return "InProgress";
    case RuleVerdict::Kind::kIssuesFound:
      return "IssuesFound";
    case RuleVerdict::Kind::kNoIssuesFound:
      return "NoIssuesFound";
    case RuleVerdict::Kind::kError:
      return "Error";
  }
  return "Error";
}

namespace {

// --- Formatting helpers ----------------------------------------------------

std::string Esc(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Coordinates with one decimal: enough for the screen, keeps the page small.
std::string N(double v) {
  if (!std::isfinite(v)) return "0";
  double r = std::round(v * 10) / 10;
  if (r == std::floor(r)) return absl::StrCat(static_cast<int64_t>(r));
  return absl::StrFormat("%.1f", r);
}

// "850 µs", "6.25 ms", "303.1 ms", "1.5 s"; round values without ".0" (axis ticks).
std::string FormatDurationUs(double us) {
  auto trim = [](std::string s) {
    size_t dot = s.find('.');
    if (dot == std::string::npos) return s;
    size_t end = s.find_last_not_of('0');
    if (end == dot) --end;
    return s.substr(0, end + 1);
  };
  if (us <= 0) return "0";
  if (us < 1000) return absl::StrCat(trim(absl::StrFormat("%.0f", us)), " µs");
  if (us < 10'000) return absl::StrCat(trim(absl::StrFormat("%.2f", us / 1e3)), " ms");
  if (us < 1'000'000) return absl::StrCat(trim(absl::StrFormat("%.1f", us / 1e3)), " ms");
  if (us < 60e6) return absl::StrCat(trim(absl::StrFormat("%.2f", us / 1e6)), " s");
  return absl::StrCat(trim(absl::StrFormat("%.1f", us / 60e6)), " min");
}

std::string FormatSpan(double seconds) {
  if (seconds < 120) return absl::StrFormat("%.0f s", seconds);
  if (seconds < 2 * 3600) return absl::StrFormat("%.0f min", seconds / 60);
  if (seconds < 2 * 86400) return absl::StrFormat("%.1f h", seconds / 3600);
  return absl::StrFormat("%.1f days", seconds / 86400);
}

std::string FormatCount(int64_t n) {
  std::string digits = absl::StrCat(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

absl::Time FromSeconds(double s) {
  return absl::FromUnixMicros(static_cast<int64_t>(std::llround(s * 1e6)));
}

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E*SZ", t, absl::UTCTimeZone());
}

std::string DimensionName(MetricDimension d) {
  switch (d) {
    case MetricDimension::kCpuUtilization:
      return "CPUUtilization";
    case MetricDimension::kGpuUtilization:
      return "GPUUtilization";
    case MetricDimension::kGpuMemoryUtilization:
      return "GPUMemoryUtilization";
    case MetricDimension::kMemoryUsedPercent:
      return "MemoryUsedPercent";
    case MetricDimension::kIoWaitPercentage:
      return "I/OWaitPercentage";
    case MetricDimension::kOther:
      break;
  }
  return "Other";
}

// Tableau 10: distinguishable, colour-blind friendlier than the defaults.
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
constexpr int kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);

// Viridis in 10 steps: perceptually uniform, readable in grey.
constexpr const char* kHeat[] = {"#440154", "#482878", "#3e4989", "#31688e", "#26828e",
                                 "#1f9e89", "#35b779", "#6ece58", "#b5de2b", "#fde725"};
constexpr int kHeatLevels = 10;

// --- Chart geometry -------------------------------------------------------

constexpr double kChartWidth = 960;
constexpr double kLeft = 56, kRight = 24, kTop = 16, kBottom = 40;

struct Axis {
  double lo, hi;    // Data range.
  double px0, px1;  // Pixel range.
  double operator()(double v) const {
    if (hi <= lo) return (px0 + px1) / 2;
    return px0 + (v - lo) / (hi - lo) * (px1 - px0);
  }
};

double NiceStep(double range, int target) {
  double raw = range / std::max(1, target);
  double mag = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * mag >= raw) return m * mag;
  }
  return 10 * mag;
}

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
    ticks.emplace_back(t, absl::FormatTime(format, FromSeconds(t), absl::UTCTimeZone()));
  }
  return ticks;
}

struct Reference {  // A dashed horizontal threshold line.
  double value;
  std::string label;
};

std::optional<double> Param(const ProfilerRuleFinding& f, const std::string& name) {
  auto it = f.parameters.find(name);
  double v;
  if (it == f.parameters.end() || !absl::SimpleAtod(it->second, &v)) return std::nullopt;
  return v;
}

// Threshold lines from the findings: (rule, parameter) pairs on a chart.
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

std::string EmptyState(const std::string& id, const std::string& message) {
  return absl::StrCat("<div class=\"empty-state\" id=\"", id, "-empty\">", Esc(message),
                      "</div>\n");
}

std::string SvgOpen(const std::string& id, double height, const std::string& label) {
  return absl::StrCat("<svg class=\"chart\" id=\"", id, "\" viewBox=\"0 0 ", N(kChartWidth), " ",
                      N(height), "\" preserveAspectRatio=\"xMidYMid meet\" role=\"img\" ",
                      "aria-label=\"", Esc(label), "\" xmlns=\"http://www.w3.org/2000/svg\">\n");
}

std::string TimeAxis(const Axis& x, double y) {
  std::string s = absl::StrCat("<g class=\"axis x-axis\"><line x1=\"", N(x.px0), "\" y1=\"", N(y),
                               "\" x2=\"", N(x.px1), "\" y2=\"", N(y), "\"/>");
  for (const auto& [t, label] : TimeTicks(x.lo, x.hi)) {
    double px = x(t);
    absl::StrAppend(&s, "<line x1=\"", N(px), "\" y1=\"", N(y), "\" x2=\"", N(px), "\" y2=\"",
                    N(y + 5), "\"/><text x=\"", N(px), "\" y=\"", N(y + 18),
                    "\" text-anchor=\"middle\">", Esc(label), "</text>");
  }
  absl::StrAppend(&s, "<text class=\"axis-title\" x=\"", N(x.px1), "\" y=\"", N(y + 34),
                  "\" text-anchor=\"end\">time (UTC)</text></g>\n");
  return s;
}

std::string LegendHtml(const std::vector<std::pair<std::string, std::string>>& items) {
  std::string s = "<div class=\"legend\">";
  for (const auto& [label, color] : items) {
    absl::StrAppend(&s,
                    "<span class=\"legend-item\"><span class=\"swatch\" style=\"background:", color,
                    "\"></span>", Esc(label), "</span>");
  }
  return s + "</div>\n";
}

// --- Line chart over time buckets ----------------------------------------

struct Line {
  std::string label;
  std::vector<std::optional<double>> y;  // Per common bucket.
};

struct TimeGrid {
  double origin = 0, width = 1;
  int first = 0, last = -1;  // Non-empty bucket range.
};

// Copies of `series` regridded to one common grid (the widest), so their
// buckets line up.
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

std::vector<std::optional<double>> Means(const Buckets& b) {
  std::vector<std::optional<double>> y(ProfilerReportData::kTimeBuckets);
  if (b.empty()) return y;
  for (int i = 0; i < ProfilerReportData::kTimeBuckets; ++i) {
    const Buckets::Cell& c = b.cells()[i];
    if (c.count) y[i] = c.sum / static_cast<double>(c.count);
  }
  return y;
}

// At most this many lines per chart; more become a mean line and a min-max band.
constexpr int kMaxLines = 10;

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
    absl::StrAppend(&d, pen ? "L" : "M", N(px), " ", N(yaxis(*y[i])));
    pen = true;
  }
  return d;
}

std::string LineChartSvg(const std::string& id, const std::string& title, std::vector<Line> lines,
                         const TimeGrid& g, const std::vector<Reference>& refs,
                         const std::string& unit_title) {
  constexpr double kHeight = 300;
  Axis x{g.origin + g.first * g.width, g.origin + (g.last + 1) * g.width, kLeft,
         kChartWidth - kRight};
  Axis y{0, 100, kHeight - kBottom, kTop};
  std::string s = SvgOpen(id, kHeight, title);
  // Horizontal grid and y labels.
  absl::StrAppend(&s, "<g class=\"grid\">");
  for (int v = 0; v <= 100; v += 25) {
    absl::StrAppend(&s, "<line x1=\"", N(x.px0), "\" y1=\"", N(y(v)), "\" x2=\"", N(x.px1),
                    "\" y2=\"", N(y(v)), "\"/><text class=\"tick\" x=\"", N(x.px0 - 6), "\" y=\"",
                    N(y(v) + 4), "\" text-anchor=\"end\">", v, "%</text>");
  }
  absl::StrAppend(&s, "</g>\n<text class=\"axis-title\" x=\"12\" y=\"", N(kTop + 120),
                  "\" transform=\"rotate(-90 12 ", N(kTop + 120), ")\" text-anchor=\"middle\">",
                  Esc(unit_title), "</text>\n");
  absl::StrAppend(&s, TimeAxis(x, kHeight - kBottom));
  std::vector<std::pair<std::string, std::string>> legend;
  if (static_cast<int>(lines.size()) > kMaxLines) {
    // Too many to tell apart: the mean over the lines and their range.
    int n = static_cast<int>(lines.size());
    Line mean{absl::StrCat("mean of ", n), {}};
    mean.y.resize(ProfilerReportData::kTimeBuckets);
    std::string band_top, band_bottom;
    std::vector<std::pair<double, std::pair<double, double>>> band;
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
    if (!band.empty()) {
      std::string d;
      for (size_t i = 0; i < band.size(); ++i) {
        absl::StrAppend(&d, i ? "L" : "M", N(band[i].first), " ", N(band[i].second.second));
      }
      for (size_t i = band.size(); i-- > 0;) {
        absl::StrAppend(&d, "L", N(band[i].first), " ", N(band[i].second.first));
      }
      absl::StrAppend(&s, "<path class=\"band\" d=\"", d, "Z\" fill=\"", kPalette[0],
                      "\" fill-opacity=\"0.18\" stroke=\"none\"><title>range over ", n,
                      "</title></path>\n");
      legend.push_back({absl::StrCat("range over ", n), "rgba(78,121,167,0.3)"});
    }
    lines = {std::move(mean)};
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    const char* color = kPalette[i % kPaletteSize];
    std::string d = Path(lines[i].y, g, x, y);
    absl::StrAppend(&s, "<path class=\"series\" d=\"", d, "\" stroke=\"", color,
                    "\" fill=\"none\" stroke-width=\"2\" stroke-linejoin=\"round\"><title>",
                    Esc(lines[i].label), "</title></path>\n");
    // Isolated buckets have no segment: give them a dot.
    for (int b = g.first; b <= g.last; ++b) {
      bool prev = b > g.first && lines[i].y[b - 1];
      bool next = b < g.last && lines[i].y[b + 1];
      if (lines[i].y[b] && !prev && !next) {
        absl::StrAppend(&s, "<circle cx=\"", N(x(g.origin + (b + 0.5) * g.width)), "\" cy=\"",
                        N(y(*lines[i].y[b])), "\" r=\"2.5\" fill=\"", color, "\"/>");
      }
    }
    legend.push_back({lines[i].label, color});
  }
  // Threshold lines, labelled inside the plot at the right end, above the
  // line; labels nudged apart when values are close.
  std::vector<Reference> sorted = refs;
  std::sort(sorted.begin(), sorted.end(),
            [](const Reference& a, const Reference& b) { return a.value > b.value; });
  double last_label_y = -1e9;
  for (const Reference& r : sorted) {
    double py = y(std::clamp(r.value, 0.0, 100.0));
    double ly = std::max(py - 5, last_label_y + 14);
    last_label_y = ly;
    absl::StrAppend(&s, "<g class=\"threshold\"><line x1=\"", N(x.px0), "\" y1=\"", N(py),
                    "\" x2=\"", N(x.px1), "\" y2=\"", N(py), "\"/><text x=\"", N(x.px1 - 4),
                    "\" y=\"", N(ly), "\" text-anchor=\"end\">", Esc(r.label), " ", Esc(N(r.value)),
                    "%</text></g>\n");
  }
  s += "</svg>\n";
  return s + LegendHtml(legend);
}

// --- Sections --------------------------------------------------------------

struct ChartSection {
  std::string id, title, subtitle, body;
};

std::string Section(const ChartSection& c) {
  return absl::StrCat(
      "<section class=\"card chart-card\" id=\"", c.id, "-section\"><h2>", Esc(c.title), "</h2>",
      c.subtitle.empty() ? "" : absl::StrCat("<p class=\"sub\">", c.subtitle, "</p>"), "\n", c.body,
      "</section>\n");
}

std::vector<const std::pair<const ProfilerReportData::SeriesKey, ProfilerReportData::Series>*>
SeriesOf(const std::map<ProfilerReportData::SeriesKey, ProfilerReportData::Series>& map,
         MetricDimension dim) {
  std::vector<const std::pair<const ProfilerReportData::SeriesKey, ProfilerReportData::Series>*>
      out;
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

// Per-device lines for `dim` (per-node means when there are too many devices).
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
  if (by_node) {
    for (const auto* e : nodes) {
      buckets.push_back(e->second.buckets);
      labels.push_back(absl::StrCat(e->first.node, per_node_mean ? " (mean of cores)" : " (mean)"));
    }
  } else {
    for (const auto* e : devices) {
      buckets.push_back(e->second.buckets);
      labels.push_back(multi_node ? absl::StrCat(e->first.node, " ", e->first.device)
                                  : e->first.device);
    }
  }
  TimeGrid g = CommonGrid(buckets);
  std::vector<Line> lines;
  for (size_t i = 0; i < buckets.size(); ++i) lines.push_back({labels[i], Means(buckets[i])});
  c.subtitle = absl::StrCat(by_node ? "Mean per node" : "Per device",
                            "; each point is the mean of a ", Esc(FormatSpan(g.width)), " bucket. ",
                            Esc(FormatCount(static_cast<int64_t>(devices.size()))), " device",
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
  for (const auto* e : mem) {
    buckets.push_back(e->second.buckets);
    labels.push_back(absl::StrCat(e->first.node, " memory used"));
  }
  for (const auto* e : io) {
    buckets.push_back(e->second.buckets);
    labels.push_back(absl::StrCat(e->first.node, " I/O wait"));
  }
  TimeGrid g = CommonGrid(buckets);
  std::vector<Line> lines;
  for (size_t i = 0; i < buckets.size(); ++i) lines.push_back({labels[i], Means(buckets[i])});
  c.subtitle = "Percent of host memory used and of CPU time waiting for I/O, per node.";
  c.body = LineChartSvg(id, c.title, std::move(lines), g, refs, "percent");
  return c;
}

// Devices x time buckets, coloured by mean utilization.
ChartSection Heatmap(const ProfilerReportData& data) {
  const std::string id = "chart-heatmap";
  ChartSection c{id, "Utilization heatmap", "", ""};
  constexpr int kMaxRows = 64;
  struct Row {
    std::string label;
    Buckets buckets;
  };
  std::vector<Row> rows;
  bool multi_node = Nodes(data).size() > 1;
  auto add = [&](const std::map<ProfilerReportData::SeriesKey, ProfilerReportData::Series>& map,
                 bool by_node) {
    for (MetricDimension dim :
         {MetricDimension::kCpuUtilization, MetricDimension::kGpuUtilization}) {
      for (const auto* e : SeriesOf(map, dim)) {
        std::string kind = dim == MetricDimension::kCpuUtilization ? "CPU" : "GPU";
        std::string label = by_node      ? absl::StrCat(e->first.node, " ", kind, " mean")
                            : multi_node ? absl::StrCat(e->first.node, " ", e->first.device)
                                         : e->first.device;
        rows.push_back({label, e->second.buckets});
      }
    }
  };
  add(data.device_series(), false);
  bool by_node = false;
  if (static_cast<int>(rows.size()) > kMaxRows) {
    rows.clear();
    add(data.node_series(), true);
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
  for (Row& r : rows) buckets.push_back(std::move(r.buckets));
  TimeGrid g = CommonGrid(buckets);
  double row_h = std::clamp(360.0 / static_cast<double>(rows.size()), 9.0, 22.0);
  double label_w = 120;
  double top = kTop, grid_h = row_h * static_cast<double>(rows.size());
  double height = top + grid_h + 40 + 44;
  Axis x{g.origin + g.first * g.width, g.origin + (g.last + 1) * g.width, label_w,
         kChartWidth - 24};
  std::string s = SvgOpen(id, height, c.title);
  double cell_w = (x.px1 - x.px0) / std::max(1, g.last - g.first + 1);
  for (size_t r = 0; r < rows.size(); ++r) {
    double ry = top + static_cast<double>(r) * row_h;
    absl::StrAppend(&s, "<g class=\"heat-row\"><text class=\"tick\" x=\"", N(label_w - 6),
                    "\" y=\"", N(ry + row_h / 2 + 4), "\" text-anchor=\"end\">", Esc(rows[r].label),
                    "</text><rect class=\"heat-bg\" x=\"", N(x.px0), "\" y=\"", N(ry),
                    "\" width=\"", N(x.px1 - x.px0), "\" height=\"", N(row_h - 1), "\"/>");
    // Runs of equal colour become one rect: keeps long jobs' pages small.
    auto means = Means(buckets[r]);
    int i = g.first;
    while (i <= g.last) {
      if (!means[i]) {
        ++i;
        continue;
      }
      int level = std::clamp(static_cast<int>(*means[i] / 10), 0, kHeatLevels - 1);
      int j = i + 1;
      while (j <= g.last && means[j] &&
             std::clamp(static_cast<int>(*means[j] / 10), 0, kHeatLevels - 1) == level) {
        ++j;
      }
      absl::StrAppend(&s, "<rect x=\"", N(x.px0 + (i - g.first) * cell_w), "\" y=\"", N(ry),
                      "\" width=\"", N((j - i) * cell_w + 0.4), "\" height=\"", N(row_h - 1),
                      "\" fill=\"", kHeat[level], "\"/>");
      i = j;
    }
    s += "</g>\n";
  }
  absl::StrAppend(&s, TimeAxis(x, top + grid_h + 2));
  // Colour scale legend.
  double ly = top + grid_h + 52, lw = 28;
  absl::StrAppend(&s, "<g class=\"heat-legend\"><text class=\"tick\" x=\"", N(label_w - 6),
                  "\" y=\"", N(ly + 12), "\" text-anchor=\"end\">utilization</text>");
  for (int k = 0; k < kHeatLevels; ++k) {
    absl::StrAppend(&s, "<rect x=\"", N(label_w + k * lw), "\" y=\"", N(ly), "\" width=\"", N(lw),
                    "\" height=\"14\" fill=\"", kHeat[k], "\"/>");
  }
  for (int k = 0; k <= kHeatLevels; k += 2) {
    absl::StrAppend(&s, "<text class=\"tick\" x=\"", N(label_w + k * lw), "\" y=\"", N(ly + 28),
                    "\" text-anchor=\"middle\">", k * 10, "%</text>");
  }
  absl::StrAppend(&s, "<rect class=\"heat-bg\" x=\"", N(label_w + 11 * lw + 20), "\" y=\"", N(ly),
                  "\" width=\"14\" height=\"14\"/><text class=\"tick\" x=\"",
                  N(label_w + 11 * lw + 40), "\" y=\"", N(ly + 12), "\">no data</text></g>\n");
  s += "</svg>\n";
  c.body = s;
  c.subtitle = absl::StrCat(by_node ? "Mean utilization per node" : "Mean utilization per device",
                            " (rows) per ", Esc(FormatSpan(g.width)), " bucket (columns).",
                            hidden ? absl::StrCat(" ", hidden, " more rows not shown.") : "");
  return c;
}

// The steps the histogram marks as outliers: StepOutlier's verdict (other
// rules flag steps for other reasons, e.g. MaxInitializationTime the first).
constexpr char kOutlierRule[] = "StepOutlier";

std::vector<int64_t> OutlierSteps(const std::vector<ProfilerRuleFinding>& findings) {
  std::set<int64_t> steps;
  for (const ProfilerRuleFinding& f : findings) {
    if (f.rule == kOutlierRule) steps.insert(f.flagged_steps.begin(), f.flagged_steps.end());
  }
  return {steps.begin(), steps.end()};
}

// Step duration histogram: log-spaced bins when durations span a wide range
// (outliers are typically 10-100x a normal step), linear otherwise.
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
  constexpr int kBins = 40;
  double lo = std::max(1.0, static_cast<double>(data.step_min_us()));
  double hi = std::max(lo + 1, static_cast<double>(data.step_max_us()));
  bool log_scale = hi / lo > 3;
  auto pos = [&](double v) {  // 0..1 along the axis.
    v = std::clamp(v, lo, hi);
    return log_scale ? std::log(v / lo) / std::log(hi / lo) : (v - lo) / (hi - lo);
  };
  auto bin_of = [&](double v) {
    return std::clamp(static_cast<int>(pos(v) * kBins), 0, kBins - 1);
  };
  std::vector<int64_t> counts(kBins, 0);
  if (data.steps_exact()) {
    for (int64_t d : data.step_durations_us()) ++counts[bin_of(static_cast<double>(d))];
  } else {
    const auto& fine = data.step_log_histogram();
    for (size_t b = 0; b < fine.size(); ++b) {
      if (fine[b] == 0) continue;
      double mid = std::sqrt(ProfilerReportData::LogBinLowerUs(static_cast<int>(b)) *
                             ProfilerReportData::LogBinLowerUs(static_cast<int>(b) + 1));
      counts[bin_of(mid)] += fine[b];
    }
  }
  std::vector<int64_t> outliers = OutlierSteps(findings);
  std::map<int64_t, int64_t> outlier_durations = data.DurationsOfSteps(outliers);
  std::vector<bool> outlier_bin(kBins, false);
  for (const auto& [step, d] : outlier_durations) {
    outlier_bin[bin_of(static_cast<double>(d))] = true;
  }

  constexpr double kHeight = 300;
  Axis x{0, 1, kLeft + 10, kChartWidth - kRight};
  int64_t max_count = *std::max_element(counts.begin(), counts.end());
  // Square-root counts so a dozen outliers stay visible next to thousands of
  // normal steps.
  Axis y{0, std::sqrt(static_cast<double>(std::max<int64_t>(1, max_count))), kHeight - kBottom,
         kTop + 8};
  std::string s = SvgOpen(id, kHeight, c.title);
  absl::StrAppend(&s, "<g class=\"grid\">");
  // 0 and 1-2-5 counts, skipping those too close to the previous label.
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
  for (int64_t t : count_ticks) {
    double py = y(std::sqrt(static_cast<double>(t)));
    absl::StrAppend(&s, "<line x1=\"", N(x.px0), "\" y1=\"", N(py), "\" x2=\"", N(x.px1),
                    "\" y2=\"", N(py), "\"/><text class=\"tick\" x=\"", N(x.px0 - 6), "\" y=\"",
                    N(py + 4), "\" text-anchor=\"end\">", FormatCount(t), "</text>");
  }
  absl::StrAppend(&s, "</g>\n<text class=\"axis-title\" x=\"12\" y=\"", N(kTop + 120),
                  "\" transform=\"rotate(-90 12 ", N(kTop + 120),
                  ")\" text-anchor=\"middle\">steps (√ scale)</text>\n");
  double bw = (x.px1 - x.px0) / kBins;
  auto edge = [&](int b) {
    double f = static_cast<double>(b) / kBins;
    return log_scale ? lo * std::pow(hi / lo, f) : lo + f * (hi - lo);
  };
  for (int b = 0; b < kBins; ++b) {
    if (counts[b] == 0) continue;
    double top = y(std::sqrt(static_cast<double>(counts[b])));
    absl::StrAppend(&s, "<rect class=\"bar", outlier_bin[b] ? " outlier" : "", "\" x=\"",
                    N(x.px0 + b * bw + 1), "\" y=\"", N(top), "\" width=\"", N(bw - 2),
                    "\" height=\"", N(std::max(1.0, y.px0 - top)), "\"><title>",
                    Esc(FormatDurationUs(edge(b))), " – ", Esc(FormatDurationUs(edge(b + 1))), ": ",
                    FormatCount(counts[b]), " step", counts[b] == 1 ? "" : "s",
                    outlier_bin[b] ? " (outliers)" : "", "</title></rect>\n");
  }
  // Outlier markers above their bars.
  for (const auto& [step, d] : outlier_durations) {
    int b = bin_of(static_cast<double>(d));
    double px = x.px0 + (pos(static_cast<double>(d))) * (x.px1 - x.px0);
    double top = y(std::sqrt(static_cast<double>(counts[b]))) - 6;
    absl::StrAppend(&s, "<path class=\"outlier-marker\" d=\"M", N(px - 5), " ", N(top - 8), "L",
                    N(px + 5), " ", N(top - 8), "L", N(px), " ", N(top), "Z\"><title>step ", step,
                    ": ", Esc(FormatDurationUs(static_cast<double>(d))), "</title></path>\n");
  }
  // Mean and, with StepOutlier's stddev, its threshold are not drawn: the
  // rule computes them per mode and node; the list below names its verdict.
  // X axis.
  double ay = kHeight - kBottom;
  absl::StrAppend(&s, "<g class=\"axis x-axis\"><line x1=\"", N(x.px0), "\" y1=\"", N(ay),
                  "\" x2=\"", N(x.px1), "\" y2=\"", N(ay), "\"/>");
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
  for (double t : ticks) {
    double px = x.px0 + pos(t) * (x.px1 - x.px0);
    absl::StrAppend(&s, "<line x1=\"", N(px), "\" y1=\"", N(ay), "\" x2=\"", N(px), "\" y2=\"",
                    N(ay + 5), "\"/><text x=\"", N(px), "\" y=\"", N(ay + 18),
                    "\" text-anchor=\"middle\">", Esc(FormatDurationUs(t)), "</text>");
  }
  absl::StrAppend(&s, "<text class=\"axis-title\" x=\"", N(x.px1), "\" y=\"", N(ay + 34),
                  "\" text-anchor=\"end\">step duration", log_scale ? " (log scale)" : "",
                  "</text></g>\n</svg>\n");
  std::string legend = LegendHtml({{"steps", "#4e79a7"}, {"bins with outlier steps", "#e15759"}});
  std::string list;
  if (outliers.empty()) {
    list = absl::StrCat("<p class=\"outliers none\">No outlier steps flagged by ", kOutlierRule,
                        ".</p>\n");
  } else {
    constexpr size_t kMaxListed = 200;
    std::vector<std::string> items;
    for (size_t i = 0; i < outliers.size() && i < kMaxListed; ++i) {
      auto it = outlier_durations.find(outliers[i]);
      items.push_back(absl::StrCat(
          "<li>step ", outliers[i],
          it == outlier_durations.end()
              ? ""
              : absl::StrCat(" <span class=\"dur\">",
                             Esc(FormatDurationUs(static_cast<double>(it->second))), "</span>"),
          "</li>"));
    }
    list = absl::StrCat("<div class=\"outliers\" id=\"outlier-steps\"><h3>",
                        FormatCount(static_cast<int64_t>(outliers.size())), " outlier step",
                        outliers.size() == 1 ? "" : "s", " flagged by ", kOutlierRule, "</h3><ul>",
                        absl::StrJoin(items, ""),
                        outliers.size() > kMaxListed
                            ? absl::StrCat("<li>and ", outliers.size() - kMaxListed, " more</li>")
                            : "",
                        "</ul></div>\n");
  }
  c.subtitle = absl::StrCat(FormatCount(data.step_events()), " step events; median ",
                            Esc(FormatDurationUs(data.StepQuantileUs(0.5))), ", p95 ",
                            Esc(FormatDurationUs(data.StepQuantileUs(0.95))), ", max ",
                            Esc(FormatDurationUs(static_cast<double>(data.step_max_us()))), ".");
  c.body = s + legend + list;
  return c;
}

// Step duration by step number: bucket mean and max, outliers as dots.
ChartSection StepTimeline(const ProfilerReportData& data,
                          const std::vector<ProfilerRuleFinding>& findings) {
  const std::string id = "chart-step-timeline";
  ChartSection c{id, "Step duration by step", "", ""};
  const Buckets& b = data.step_buckets();
  if (b.empty()) {
    c.body = EmptyState(id, "No training steps recorded yet.");
    return c;
  }
  int first = ProfilerReportData::kStepBuckets, last = -1;
  double ymax = 0;
  for (int i = 0; i < ProfilerReportData::kStepBuckets; ++i) {
    const Buckets::Cell& cell = b.cells()[i];
    if (cell.count == 0) continue;
    first = std::min(first, i);
    last = std::max(last, i);
    ymax = std::max(ymax, cell.max);
  }
  constexpr double kHeight = 260;
  double ystep = NiceStep(std::max(1.0, ymax), 4);
  double ytop = std::ceil(std::max(1.0, ymax) / ystep) * ystep;
  Axis x{b.origin() + first * b.width(), b.origin() + (last + 1) * b.width(), kLeft + 10,
         kChartWidth - kRight};
  Axis y{0, ytop, kHeight - kBottom, kTop};
  std::string s = SvgOpen(id, kHeight, c.title);
  absl::StrAppend(&s, "<g class=\"grid\">");
  for (double t = 0; t <= ytop + 1e-9; t += ystep) {
    absl::StrAppend(&s, "<line x1=\"", N(x.px0), "\" y1=\"", N(y(t)), "\" x2=\"", N(x.px1),
                    "\" y2=\"", N(y(t)), "\"/><text class=\"tick\" x=\"", N(x.px0 - 6), "\" y=\"",
                    N(y(t) + 4), "\" text-anchor=\"end\">", Esc(FormatDurationUs(t)), "</text>");
  }
  s += "</g>\n";
  std::string dmean, dmax;
  bool pen = false;
  for (int i = first; i <= last; ++i) {
    const Buckets::Cell& cell = b.cells()[i];
    if (cell.count == 0) {
      pen = false;
      continue;
    }
    double px = x(b.origin() + (i + 0.5) * b.width());
    absl::StrAppend(&dmean, pen ? "L" : "M", N(px), " ",
                    N(y(cell.sum / static_cast<double>(cell.count))));
    absl::StrAppend(&dmax, pen ? "L" : "M", N(px), " ", N(y(cell.max)));
    pen = true;
  }
  absl::StrAppend(&s, "<path class=\"series\" d=\"", dmax, "\" stroke=\"", kPalette[1],
                  "\" fill=\"none\" stroke-width=\"1.5\"><title>max</title></path>\n",
                  "<path class=\"series\" d=\"", dmean, "\" stroke=\"", kPalette[0],
                  "\" fill=\"none\" stroke-width=\"2\"><title>mean</title></path>\n");
  for (const auto& [step, d] : data.DurationsOfSteps(OutlierSteps(findings))) {
    absl::StrAppend(&s, "<circle class=\"outlier-dot\" cx=\"",
                    N(x(static_cast<double>(step) + 0.5)), "\" cy=\"", N(y(static_cast<double>(d))),
                    "\" r=\"4\"><title>step ", step, ": ",
                    Esc(FormatDurationUs(static_cast<double>(d))), "</title></circle>");
  }
  double ay = kHeight - kBottom;
  absl::StrAppend(&s, "\n<g class=\"axis x-axis\"><line x1=\"", N(x.px0), "\" y1=\"", N(ay),
                  "\" x2=\"", N(x.px1), "\" y2=\"", N(ay), "\"/>");
  double xstep = std::max(1.0, NiceStep(x.hi - x.lo, 8));
  for (double t = std::ceil(x.lo / xstep) * xstep; t <= x.hi; t += xstep) {
    absl::StrAppend(&s, "<line x1=\"", N(x(t)), "\" y1=\"", N(ay), "\" x2=\"", N(x(t)), "\" y2=\"",
                    N(ay + 5), "\"/><text x=\"", N(x(t)), "\" y=\"", N(ay + 18),
                    "\" text-anchor=\"middle\">", FormatCount(static_cast<int64_t>(t)), "</text>");
  }
  absl::StrAppend(&s, "<text class=\"axis-title\" x=\"", N(x.px1), "\" y=\"", N(ay + 34),
                  "\" text-anchor=\"end\">step</text></g>\n</svg>\n");
  c.subtitle = absl::StrCat("Mean and maximum step duration per ",
                            b.width() == 1 ? "step" : absl::StrCat(N(b.width()), " steps"), ".");
  c.body =
      s + LegendHtml({{"mean", kPalette[0]}, {"max", kPalette[1]}, {"outlier step", "#e15759"}});
  return c;
}

const char kCss[] = R"css(
:root{--fg:#1f2933;--muted:#616e7c;--line:#e4e7eb;--bg:#f5f7fa;--card:#fff;--accent:#4e79a7;
--bad:#c62828;--bad-bg:#fdecea;--ok:#2e7d32;--ok-bg:#e8f5e9;--run:#1565c0;--run-bg:#e3f2fd;
--err:#8e24aa;--err-bg:#f3e5f5}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.5 system-ui,-apple-system,
"Segoe UI",Roboto,"Helvetica Neue",Arial,"DejaVu Sans",sans-serif}
main{max-width:1200px;margin:0 auto;padding:24px 20px 48px}
header.top{background:#1f2933;color:#fff;padding:22px 20px}
header.top .inner{max-width:1200px;margin:0 auto}
header.top h1{margin:0 0 4px;font-size:26px;font-weight:650;word-break:break-all}
header.top .meta{color:#cbd2d9;font-size:14px}
header.top .meta b{color:#fff;font-weight:600}
.mode{display:inline-block;margin-left:8px;padding:2px 10px;border-radius:999px;font-size:13px;
font-weight:600;vertical-align:middle}
.mode.live{background:#fff3cd;color:#7a5b00}.mode.final{background:#d1f2dc;color:#14532d}
.summary{margin-top:8px;color:#cbd2d9;font-size:13px;word-break:break-word}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:12px;
margin-bottom:20px}
.stat{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:12px 14px}
.stat .v{font-size:22px;font-weight:650}.stat .k{color:var(--muted);font-size:13px}
.stat.alert .v{color:var(--bad)}
.card{background:var(--card);border:1px solid var(--line);border-radius:12px;padding:18px 20px;
margin-bottom:20px;box-shadow:0 1px 2px rgba(0,0,0,.04)}
h2{margin:0 0 4px;font-size:19px}h3{font-size:15px;margin:12px 0 6px}
.sub{margin:0 0 10px;color:var(--muted);font-size:13.5px}
.table-wrap{overflow-x:auto}
table{border-collapse:collapse;width:100%;min-width:860px;font-size:14px;table-layout:fixed}
col.c-rule{width:19%}col.c-status{width:11%}col.c-num{width:7%}col.c-params{width:22%}
col.c-details{width:34%}
th{text-align:left;color:var(--muted);font-weight:600;border-bottom:2px solid var(--line);
padding:8px 10px}
td{border-bottom:1px solid var(--line);padding:9px 10px;vertical-align:top}
tr.issues td{background:var(--bad-bg)}tr.issues td.rule{border-left:4px solid var(--bad)}
th.num{text-align:right}td.rule{font-weight:600;overflow-wrap:anywhere}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.details{font-size:13.5px;color:#323f4b;overflow-wrap:anywhere}
.badge{display:inline-block;padding:2px 9px;border-radius:999px;font-size:12.5px;font-weight:650;
white-space:nowrap}
.badge.IssuesFound{background:var(--bad);color:#fff}.badge.NoIssuesFound{background:var(--ok-bg);
color:var(--ok)}.badge.InProgress{background:var(--run-bg);color:var(--run)}
.badge.Error{background:var(--err-bg);color:var(--err)}
.params{display:flex;flex-wrap:wrap;gap:4px}
.param{background:#eef2f6;border-radius:6px;padding:1px 7px;font:12px ui-monospace,
SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace;overflow-wrap:anywhere}
svg.chart{width:100%;height:auto;display:block;font-size:12px;fill:var(--fg)}
svg.chart text{fill:#52606d}svg.chart .axis-title{fill:var(--muted);font-size:12px}
svg.chart .grid line{stroke:#edf0f3}svg.chart .axis line{stroke:#9aa5b1}
svg.chart .threshold line{stroke:#c62828;stroke-dasharray:6 4;stroke-width:1.5}
svg.chart .threshold text{fill:#c62828;font-size:11.5px;font-weight:600;paint-order:stroke;
stroke:#fff;stroke-width:4px;stroke-linejoin:round}
svg.chart .bar{fill:#4e79a7}svg.chart .bar.outlier{fill:#e15759}
svg.chart .outlier-marker,svg.chart .outlier-dot{fill:#e15759;stroke:#fff;stroke-width:1}
svg.chart .heat-bg{fill:#eceff3}
.legend{display:flex;flex-wrap:wrap;gap:6px 16px;margin-top:8px;font-size:13px;color:#3e4c59}
.legend-item{display:inline-flex;align-items:center;gap:6px}
.swatch{width:14px;height:14px;border-radius:3px;display:inline-block}
.empty-state{border:2px dashed var(--line);border-radius:10px;padding:36px 20px;text-align:center;
color:var(--muted);font-size:15px;background:#fafbfc}
.outliers ul{display:flex;flex-wrap:wrap;gap:6px;list-style:none;padding:0;margin:0}
.outliers li{background:var(--bad-bg);color:var(--bad);border-radius:6px;padding:2px 8px;
font-size:13px;font-variant-numeric:tabular-nums}.outliers .dur{color:#7f1d1d;opacity:.8}
.outliers.none{color:var(--muted);font-size:13.5px}
.grid2{display:grid;grid-template-columns:1fr;gap:0}
footer{color:var(--muted);font-size:12.5px;text-align:center;margin-top:24px}
@media (max-width:640px){header.top h1{font-size:20px}main{padding:16px 10px}}
)css";

std::string FindingsTable(const std::vector<ProfilerRuleFinding>& findings) {
  std::string s =
      "<section class=\"card\" id=\"findings\"><h2>Rule findings</h2>"
      "<p class=\"sub\">What each profiler rule concluded, with the thresholds it used. "
      "“Triggered” counts the times the rule's condition held.</p>\n";
  if (findings.empty()) {
    return s + EmptyState("findings", "No profiler rule has reported yet.") + "</section>\n";
  }
  // IssuesFound first, then errors, undecided, clean; stable within each.
  auto rank = [](RuleVerdict::Kind k) {
    switch (k) {
      case RuleVerdict::Kind::kIssuesFound:
        return 0;
      case RuleVerdict::Kind::kError:
        return 1;
      case RuleVerdict::Kind::kContinue:
        return 2;
      case RuleVerdict::Kind::kNoIssuesFound:
        return 3;
    }
    return 4;
  };
  std::vector<const ProfilerRuleFinding*> order;
  order.reserve(findings.size());
  for (const ProfilerRuleFinding& f : findings) order.push_back(&f);
  std::stable_sort(order.begin(), order.end(),
                   [&](const ProfilerRuleFinding* a, const ProfilerRuleFinding* b) {
                     return rank(a->status) < rank(b->status);
                   });
  absl::StrAppend(
      &s,
      "<div class=\"table-wrap\"><table id=\"findings-table\"><colgroup><col class=\"c-rule\">"
      "<col class=\"c-status\"><col class=\"c-num\"><col class=\"c-num\">"
      "<col class=\"c-params\"><col class=\"c-details\"></colgroup>"
      "<thead><tr><th>Rule</th>"
      "<th>Status</th><th class=\"num\">Triggered</th><th class=\"num\">Data points</th>"
      "<th>Thresholds and "
      "parameters</th><th>Details</th></tr></thead><tbody>\n");
  for (const ProfilerRuleFinding* f : order) {
    std::string status = ProfilerRuleStatusName(f->status);
    std::string params;
    for (const auto& [k, v] : f->parameters) {
      absl::StrAppend(&params, "<span class=\"param\">", Esc(k), " = ", Esc(v), "</span>");
    }
    absl::StrAppend(
        &s, "<tr class=\"finding", f->status == RuleVerdict::Kind::kIssuesFound ? " issues" : "",
        "\" data-status=\"", status, "\"><td class=\"rule\">", Esc(f->rule),
        "</td><td><span class=\"badge ", status, "\">", status, "</span></td><td class=\"num\">",
        FormatCount(f->violations), "</td><td class=\"num\">", FormatCount(f->datapoints),
        "</td><td><div class=\"params\">", params, "</div></td><td class=\"details\">",
        Esc(f->details), "</td></tr>\n");
  }
  return s + "</tbody></table></div></section>\n";
}

std::string StatCard(const std::string& value, const std::string& key, bool alert = false) {
  return absl::StrCat("<div class=\"stat", alert ? " alert" : "", "\"><div class=\"v\">",
                      Esc(value), "</div><div class=\"k\">", Esc(key), "</div></div>");
}

int CountDevices(const ProfilerReportData& data, MetricDimension dim) {
  return static_cast<int>(SeriesOf(data.device_series(), dim).size());
}

}  // namespace

std::string RenderProfilerReportHtml(const ProfilerReportData& data,
                                     const std::vector<ProfilerRuleFinding>& findings,
                                     const ProfilerReportContext& context) {
  std::string generated =
      absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", context.generated_at, absl::UTCTimeZone());
  std::string s = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      // No network at all: nothing to fetch, not even a favicon.
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'; img-src data:\">\n"
      "<link rel=\"icon\" href=\"data:,\">\n<title>",
      Esc(context.training_job_name), " — profiler report</title>\n<style>", kCss,
      "</style></head>\n<body>\n<header class=\"top\"><div class=\"inner\">"
      "<div class=\"meta\">",
      Esc(context.rule_configuration_name.empty() ? "ProfilerReport"
                                                  : context.rule_configuration_name),
      " · SageMaker Debugger profiler report</div><h1 id=\"job-name\">",
      Esc(context.training_job_name),
      "</h1><div class=\"meta\">Training job status <b id=\"job-status\">",
      Esc(context.training_job_status.empty() ? "Unknown" : context.training_job_status),
      "</b> · generated <b>", generated, "</b>",
      context.final ? "<span class=\"mode final\" id=\"report-mode\">Final report</span>"
                    : "<span class=\"mode live\" id=\"report-mode\">Live — regenerated as data "
                      "arrives</span>",
      "</div>",
      context.data_summary.empty() ? ""
                                   : absl::StrCat("<div class=\"summary\" id=\"data-summary\">",
                                                  Esc(context.data_summary), "</div>"),
      "</div></header>\n<main>\n");

  // Overview.
  int issues = 0;
  for (const ProfilerRuleFinding& f : findings) {
    issues += f.status == RuleVerdict::Kind::kIssuesFound;
  }
  double span = data.metric_points() ? data.last_timestamp() - data.first_timestamp() : 0;
  absl::StrAppend(
      &s, "<div class=\"cards\" id=\"overview\">",
      StatCard(absl::StrCat(issues, " of ", findings.size()), "rules found issues", issues > 0),
      StatCard(data.metric_points() ? FormatSpan(span) : "—", "of system metrics"),
      StatCard(absl::StrCat(Nodes(data).size()), "nodes"),
      StatCard(absl::StrCat(CountDevices(data, MetricDimension::kCpuUtilization)), "CPU cores"),
      StatCard(absl::StrCat(CountDevices(data, MetricDimension::kGpuUtilization)), "GPUs"),
      StatCard(FormatCount(data.metric_points()), "metric points"),
      StatCard(FormatCount(data.step_events()), "step events"), "</div>\n");

  s += FindingsTable(findings);

  s += Section(UtilizationChart(
      data, MetricDimension::kCpuUtilization, "chart-cpu", "CPU utilization over time", true,
      References(findings, {{"CPUBottleneck", "cpu_threshold"}}),
      "No CPU utilization metrics recorded yet — is system profiling enabled?"));
  s += Section(UtilizationChart(data, MetricDimension::kGpuUtilization, "chart-gpu",
                                "GPU utilization over time", false,
                                References(findings, {{"LowGPUUtilization", "threshold_p95"},
                                                      {"LowGPUUtilization", "threshold_p5"},
                                                      {"CPUBottleneck", "gpu_threshold"},
                                                      {"IOBottleneck", "gpu_threshold"}}),
                                "No GPU metrics recorded — is this a CPU-only instance?"));
  s += Section(Heatmap(data));
  s += Section(StepHistogram(data, findings));
  s += Section(StepTimeline(data, findings));
  s += Section(UtilizationChart(data, MetricDimension::kGpuMemoryUtilization, "chart-gpu-memory",
                                "GPU memory utilization over time", false, {},
                                "No GPU memory metrics recorded — is this a CPU-only instance?"));
  s += Section(HostChart(data, References(findings, {{"IOBottleneck", "io_threshold"}})));
  absl::StrAppend(&s,
                  "<footer>Self-contained report: no network access is needed to view it. "
                  "Times are UTC. Generated by debugplane.</footer>\n</main>\n</body></html>\n");
  return s;
}

std::string RenderProfilerReportJson(const ProfilerReportData& data,
                                     const std::vector<ProfilerRuleFinding>& findings,
                                     const ProfilerReportContext& context) {
  using nlohmann::json;
  json j;
  j["job"] = context.training_job_name;
  j["rule_configuration_name"] = context.rule_configuration_name;
  j["training_job_status"] = context.training_job_status;
  j["final"] = context.final;
  j["generated_at"] = Rfc3339(context.generated_at);
  j["data_summary"] = context.data_summary;
  json jf = json::array();
  for (const ProfilerRuleFinding& f : findings) {
    jf.push_back({{"rule", f.rule},
                  {"status", ProfilerRuleStatusName(f.status)},
                  {"details", f.details},
                  {"parameters", f.parameters},
                  {"datapoints", f.datapoints},
                  {"violations", f.violations},
                  {"flagged_steps", f.flagged_steps}});
  }
  j["findings"] = std::move(jf);

  json sys;
  sys["metric_points"] = data.metric_points();
  sys["start"] = data.metric_points() ? json(Rfc3339(FromSeconds(data.first_timestamp()))) : json();
  sys["end"] = data.metric_points() ? json(Rfc3339(FromSeconds(data.last_timestamp()))) : json();
  double bucket = 0;
  for (const auto& [key, series] : data.node_series()) {
    if (!series.buckets.empty()) bucket = std::max(bucket, series.buckets.width());
  }
  sys["bucket_seconds"] = bucket > 0 ? json(bucket) : json();
  std::set<std::string> nodes = Nodes(data);
  sys["nodes"] = std::vector<std::string>(nodes.begin(), nodes.end());
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
  json jd = json::array();
  for (auto& [k, d] : devices) jd.push_back(std::move(d));
  sys["devices"] = std::move(jd);
  j["system"] = std::move(sys);

  json steps;
  int64_t n = data.step_events();
  steps["count"] = n;
  steps["exact"] = data.steps_exact();
  auto ms = [&](double us) { return n ? json(us / 1000.0) : json(); };
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
  j["steps"] = std::move(steps);
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace debugplane::rules_engine
