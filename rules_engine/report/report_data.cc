// ProfilerReportData: what the report draws, summarized as data arrives
// (time buckets, value histograms, step durations).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "rules_engine/report/profiler_report.h"

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
  cells_[i].Add(value);
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
    cells_[j].Merge(old[i]);
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
    merged[j].Merge(o);
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
  values_.Add(value);
}

double PercentHistogram::Quantile(double q) const {
  if (values_.count == 0) return 0;
  int64_t rank =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(q * static_cast<double>(values_.count))));
  int64_t seen = 0;
  for (int i = 0; i < kPercentBins; ++i) {
    seen += bins_[i];
    if (seen >= rank) {
      return std::clamp(i * ProfilerReportData::kValueResolution, values_.min, values_.max);
    }
  }
  return values_.max;
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

}  // namespace debugplane::rules_engine
