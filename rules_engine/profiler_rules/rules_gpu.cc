// The GPU rules over system metrics: LowGPUUtilization, GPUMemoryIncrease,
// LoadBalancing (per GPU series of one node).

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "rules_engine/profiler_rules/system_rule.h"
#include "rules_engine/rule/percentile.h"
#include "rules_engine/rule/rule_parameters.h"

namespace debugplane::rules_engine::profiler_rules_internal {
namespace {

struct WindowedSeries {
  int64_t seen = 0;
  std::vector<double> window;
  double first_ts = 0, last_ts = 0;
  int64_t first_index = 0;  // 1-based index in the series of window[0].
  int windows_done = 0;
  double last_p95 = 0, last_p5 = 0;  // Of the last evaluated window.
};

// ---------------------------------------------------------------------------
// LowGPUUtilization. Per GPU (node, Name) of GPUUtilization: the first
// `patience` points are skipped, then non-overlapping windows of `window`
// points are evaluated as they fill: p95 < threshold_p95 -> underutilized;
// otherwise p5 < threshold_p5 -> fluctuating (the docs' "p95 above
// threshold_p95 and p5 below threshold_p5"; p95 == threshold counts as
// above). Decision: at OnEnd a trailing partial window is evaluated too if it
// holds at least half a window (a run just past patience still gets judged).
// Violations: windows found underutilized or fluctuating.
class LowGpuUtilization : public SystemRule<LowGpuUtilization> {
 public:
  explicit LowGpuUtilization(RuleParameterReader& p)
      : threshold_p95_(PercentParameter(p, "threshold_p95", 70)),
        threshold_p5_(PercentParameter(p, "threshold_p5", 10)),
        patience_(p.Int("patience", 1000, 0)),
        window_(p.Int("window", 500, 1, 10000000)) {
    CommonParameters(p);
  }
  std::string name() const override { return "LowGPUUtilization"; }

  bool OnPoint(const SystemMetricPoint& pt) {
    if (pt.dim != MetricDimension::kGpuUtilization) return false;
    const SeriesKey key(pt.node_id, pt.name);
    WindowedSeries& s = state_cache_.FindOrAdd(series_, key);
    ++s.seen;
    if (s.seen <= patience_) return false;
    if (s.window.empty()) s.first_ts = pt.timestamp, s.first_index = s.seen;
    s.window.push_back(pt.value);
    s.last_ts = pt.timestamp;
    if (static_cast<int64_t>(s.window.size()) < window_) return false;
    return Fire(Evaluate(pt.node_id, pt.name, s));
  }

 protected:
  RuleVerdict End() override {
    if (series_.empty()) return NoIssues("no GPUUtilization metrics (no GPU seen)");
    RuleVerdict trailing = FirstIssue(series_, [this](auto& entry) {
      auto& [key, s] = entry;
      if (s.window.empty() || static_cast<int64_t>(s.window.size()) * 2 < window_) {
        return RuleVerdict::Continue();
      }
      return Evaluate(key.first, key.second, s);
    });
    if (trailing.kind == RuleVerdict::Kind::kIssuesFound) return trailing;
    std::string details;
    for (const auto& [key, s] : series_) {
      absl::StrAppend(&details, details.empty() ? "" : "; ", key.second.view(), " on ",
                      key.first.view(), ": ", s.seen, " points, ", s.windows_done, " windows of ",
                      window_, " evaluated after patience ", patience_);
    }
    return NoIssues(details);
  }

  int64_t Violations() const override { return violations_; }
  std::string Progress() const override {
    if (series_.empty()) return "no GPUUtilization metrics yet";
    std::string out;
    for (const auto& [key, s] : series_) {
      std::string part = absl::StrCat(key.second.view(), " on ", key.first.view(), ": ", s.seen,
                                      " points, ", s.windows_done, " windows of ", window_,
                                      " evaluated after patience ", patience_);
      if (s.windows_done > 0) {
        absl::StrAppend(&part, ", last p95 ", FormatPercent(s.last_p95), " (threshold_p95 ",
                        FormatPercent(threshold_p95_), "), p5 ", FormatPercent(s.last_p5),
                        " (threshold_p5 ", FormatPercent(threshold_p5_), ")");
      }
      AppendPart(&out, part);
    }
    return out;
  }

 private:
  RuleVerdict Evaluate(absl::string_view node, absl::string_view gpu, WindowedSeries& s) {
    scratch_ = s.window;
    const size_t n = scratch_.size();
    double p95 = LinearInterpolatedPercentile(&scratch_, 95);
    double p5 = LinearInterpolatedPercentile(&scratch_, 5);
    ++s.windows_done;
    s.last_p95 = p95, s.last_p5 = p5;
    std::string where = absl::StrCat(
        " over ", n, " points (", s.first_index, "-", s.first_index + n - 1, " of that GPU) from ",
        FormatTimestamp(s.first_ts), " to ", FormatTimestamp(s.last_ts));
    s.window.clear();
    if (p95 < threshold_p95_) {
      ++violations_;
      return Issues(absl::StrCat("GPU utilization of ", gpu, " on ", node,
                                 " is low: 95th percentile ", FormatPercent(p95),
                                 " below threshold_p95 ", FormatPercent(threshold_p95_), where));
    }
    if (p5 < threshold_p5_) {
      ++violations_;
      return Issues(absl::StrCat("GPU utilization of ", gpu, " on ", node,
                                 " fluctuates: 5th percentile ", FormatPercent(p5),
                                 " below threshold_p5 ", FormatPercent(threshold_p5_),
                                 " while the 95th percentile is ", FormatPercent(p95),
                                 " (threshold_p95 ", FormatPercent(threshold_p95_), ")", where));
    }
    return RuleVerdict::Continue();
  }

  double threshold_p95_, threshold_p5_;
  int64_t patience_, window_;
  std::map<SeriesKey, WindowedSeries> series_;
  SeriesStateCache<SeriesKey, WindowedSeries> state_cache_;
  std::vector<double> scratch_;  // A window's copy, sorted for percentiles.
  int64_t violations_ = 0;
};

// ---------------------------------------------------------------------------
// GPUMemoryIncrease. Per GPU (node, Name) of GPUMemoryUtilization: the first
// `patience` points are skipped, then non-overlapping windows of `window`
// points; the rule fires when a window's mean exceeds the previous window's
// mean by more than `increase` percentage points (decision: "absolute
// increase" = difference of utilization percentages, not a relative
// growth). At OnEnd a trailing window of at least half a window is compared
// too. Violations: window-to-window increases above `increase`.
class GpuMemoryIncrease : public SystemRule<GpuMemoryIncrease> {
 public:
  friend class SystemRule<GpuMemoryIncrease>;
  explicit GpuMemoryIncrease(RuleParameterReader& p)
      : increase_(PercentParameter(p, "increase", 10)),
        patience_(p.Int("patience", 100, 0)),
        window_(p.Int("window", 500, 1, 10000000)) {
    CommonParameters(p);
  }
  std::string name() const override { return "GPUMemoryIncrease"; }

 protected:
  struct Series {
    int64_t seen = 0;
    double sum = 0;
    int64_t n = 0;
    double first_ts = 0, last_ts = 0;
    bool has_prev = false;
    double prev_mean = 0, prev_first_ts = 0, prev_last_ts = 0;
    double max_step = -1e300;
    int windows = 0;
  };

  bool OnPoint(const SystemMetricPoint& pt) {
    if (pt.dim != MetricDimension::kGpuMemoryUtilization) return false;
    const SeriesKey key(pt.node_id, pt.name);
    Series& s = state_cache_.FindOrAdd(series_, key);
    ++s.seen;
    if (s.seen <= patience_) return false;
    if (s.n == 0) s.first_ts = pt.timestamp;
    s.sum += pt.value, ++s.n, s.last_ts = pt.timestamp;
    if (s.n < window_) return false;
    return Fire(CloseWindow(pt.node_id, pt.name, s));
  }

  RuleVerdict End() override {
    if (series_.empty()) return NoIssues("no GPUMemoryUtilization metrics (no GPU seen)");
    RuleVerdict trailing = FirstIssue(series_, [this](auto& entry) {
      auto& [key, s] = entry;
      if (s.n == 0 || s.n * 2 < window_) return RuleVerdict::Continue();
      return CloseWindow(key.first, key.second, s);
    });
    if (trailing.kind == RuleVerdict::Kind::kIssuesFound) return trailing;
    return NoIssues(Summary(" points, not above increase "));
  }

  int64_t Violations() const override { return violations_; }
  std::string Progress() const override {
    if (series_.empty()) return "no GPUMemoryUtilization metrics yet";
    return Summary(" points so far; increase ");
  }

 private:
  // Per series: windows, largest increase between two of them (`then`
  // joins it to the threshold).
  std::string Summary(absl::string_view then) const {
    std::string details;
    for (const auto& [key, s] : series_) {
      absl::StrAppend(&details, details.empty() ? "" : "; ", key.second.view(), " on ",
                      key.first.view(), ": ", s.windows, " windows of ", window_,
                      " after patience ", patience_);
      if (s.windows >= 2) {
        absl::StrAppend(&details, ", largest increase between windows ",
                        absl::StrFormat("%.1f", s.max_step), then, FormatPercent(increase_));
      } else {
        absl::StrAppend(&details, ", too few to compare");
      }
    }
    return details;
  }

  RuleVerdict CloseWindow(absl::string_view node, absl::string_view gpu, Series& s) {
    double mean = s.sum / static_cast<double>(s.n);
    ++s.windows;
    RuleVerdict v = RuleVerdict::Continue();
    if (s.has_prev) {
      double step = mean - s.prev_mean;
      s.max_step = std::max(s.max_step, step);
      if (step > increase_) {
        ++violations_;
        v = Issues(absl::StrCat(
            "GPU memory utilization of ", gpu, " on ", node, " increased by ",
            absl::StrFormat("%.1f", step), " points (more than increase ", FormatPercent(increase_),
            "): mean ", FormatPercent(s.prev_mean), " over ", window_, " points from ",
            FormatTimestamp(s.prev_first_ts), " to ", FormatTimestamp(s.prev_last_ts),
            ", then mean ", FormatPercent(mean), " over ", s.n, " points from ",
            FormatTimestamp(s.first_ts), " to ", FormatTimestamp(s.last_ts)));
      }
    }
    s.has_prev = true;
    s.prev_mean = mean, s.prev_first_ts = s.first_ts, s.prev_last_ts = s.last_ts;
    s.sum = 0, s.n = 0;
    return v;
  }

  double increase_;
  int64_t patience_, window_;
  std::map<SeriesKey, Series> series_;
  SeriesStateCache<SeriesKey, Series> state_cache_;
  int64_t violations_ = 0;
};

// ---------------------------------------------------------------------------
// LoadBalancing. Decision (the docs only say "workload percentage"): per
// node, each GPU's GPUUtilization after its first `patience` points goes
// into a histogram of 10 bins of 10 points; every kCheckEvery points of a GPU
// and at OnEnd, each pair of GPUs of the node that both have at least
// kCheckEvery evaluated points (at OnEnd: at least one) is compared by the
// total variation distance of their normalized histograms (0 = same
// workload distribution, 1 = disjoint); above `threshold` (0..1) fires.
// A node with one GPU is never imbalanced. Violations: pairs found above
// `threshold`.
class LoadBalancing : public SystemRule<LoadBalancing> {
 public:
  friend class SystemRule<LoadBalancing>;
  explicit LoadBalancing(RuleParameterReader& p)
      : threshold_(p.Float("threshold", 0.5, 0, 1)), patience_(p.Int("patience", 10, 0)) {
    CommonParameters(p);
  }
  std::string name() const override { return "LoadBalancing"; }

 protected:
  struct Gpu {
    int64_t seen = 0, n = 0;
    std::array<int64_t, 10> bins{};
    double sum = 0, first_ts = 0, last_ts = 0;
  };
  using Gpus = std::map<MetricString, Gpu>;
  struct Where {
    Gpus* gpus;
    Gpu* gpu;
  };
  bool OnPoint(const SystemMetricPoint& pt) {
    if (pt.dim != MetricDimension::kGpuUtilization) return false;
    const Where& w = *state_cache_.Get(SeriesKey(pt.node_id, pt.name), [&] {
      Gpus& gpus = nodes_[pt.node_id];
      max_distance_.try_emplace(pt.node_id, 0.0);
      return &where_.emplace_back(Where{&gpus, &gpus[pt.name]});
    });
    Gpu& g = *w.gpu;
    ++g.seen;
    if (g.seen <= patience_) return false;
    if (g.n == 0) g.first_ts = pt.timestamp;
    ++g.n, g.sum += pt.value, g.last_ts = pt.timestamp;
    int bin = std::clamp(static_cast<int>(std::floor(pt.value / 10.0)), 0, 9);
    ++g.bins[bin];
    if (g.n % kCheckEvery != 0) return false;
    return Fire(Check(pt.node_id, *w.gpus, kCheckEvery));
  }
  RuleVerdict End() override {
    if (nodes_.empty()) return NoIssues("no GPUUtilization metrics (no GPU seen)");
    RuleVerdict imbalance =
        FirstIssue(nodes_, [this](auto& entry) { return Check(entry.first, entry.second, 1); });
    if (imbalance.kind == RuleVerdict::Kind::kIssuesFound) return imbalance;
    return NoIssues(Summary(", not above threshold "));
  }
  int64_t Violations() const override { return violations_; }
  std::string Progress() const override {
    if (nodes_.empty()) return "no GPUUtilization metrics yet";
    return Summary(" so far; threshold ");
  }

 private:
  std::string Summary(absl::string_view then) const {
    std::string details;
    for (const auto& [node, gpus] : nodes_) {
      absl::StrAppend(&details, details.empty() ? "" : "; ", node.view(), ": ", gpus.size(),
                      gpus.size() == 1 ? " GPU" : " GPUs", ", largest histogram distance ",
                      absl::StrFormat("%.2f", max_distance_.at(node)), then,
                      absl::StrFormat("%g", threshold_));
    }
    return details;
  }

  RuleVerdict Check(MetricString node, const Gpus& gpus, int64_t min_points) {
    double& max_d = max_distance_[node];
    for (auto a = gpus.begin(); a != gpus.end(); ++a) {
      if (a->second.n < min_points) continue;
      for (auto b = std::next(a); b != gpus.end(); ++b) {
        if (b->second.n < min_points) continue;
        double d = 0;
        for (int i = 0; i < 10; ++i) {
          d += std::fabs(static_cast<double>(a->second.bins[i]) / static_cast<double>(a->second.n) -
                         static_cast<double>(b->second.bins[i]) / static_cast<double>(b->second.n));
        }
        d /= 2;
        max_d = std::max(max_d, d);
        if (d > threshold_) {
          ++violations_;
          const Gpu& ga = a->second;
          const Gpu& gb = b->second;
          return Issues(absl::StrCat(
              "workload imbalance on ", node.view(), " between ", a->first.view(),
              " (mean utilization ", FormatPercent(ga.sum / static_cast<double>(ga.n)), " over ",
              ga.n, " points) and ", b->first.view(), " (mean ",
              FormatPercent(gb.sum / static_cast<double>(gb.n)), " over ", gb.n,
              " points): histogram distance ", absl::StrFormat("%.2f", d), " above threshold ",
              absl::StrFormat("%g", threshold_), ", from ",
              FormatTimestamp(std::min(ga.first_ts, gb.first_ts)), " to ",
              FormatTimestamp(std::max(ga.last_ts, gb.last_ts)), " after patience ", patience_));
        }
      }
    }
    return RuleVerdict::Continue();
  }

  double threshold_;
  int64_t patience_;
  std::map<MetricString, Gpus> nodes_;
  std::map<MetricString, double> max_distance_;
  std::deque<Where> where_;  // Stable addresses for state_cache_.
  SeriesStateCache<SeriesKey, Where> state_cache_;
  int64_t violations_ = 0;
};

}  // namespace

void AddGpuRules(ProfilerRuleFactories* factories) {
  (*factories)["LowGPUUtilization"] = MakeProfilerRule<LowGpuUtilization>;
  (*factories)["GPUMemoryIncrease"] = MakeProfilerRule<GpuMemoryIncrease>;
  (*factories)["LoadBalancing"] = MakeProfilerRule<LoadBalancing>;
}

}  // namespace debugplane::rules_engine::profiler_rules_internal
