#include "rules_engine/profiler_rules/profiler_rules.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <ctime>
#include <deque>
#include <map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "rules_engine/profiler_rules/framework_rules.h"
#include "rules_engine/profiler_rules/profiler_rule_base.h"
#include "rules_engine/rule/rule_parameters.h"

namespace debugplane::rules_engine {
namespace {

using profiler_rules_internal::CommonParameters;
using profiler_rules_internal::Issues;
using profiler_rules_internal::kMaxDetails;
using profiler_rules_internal::MakeProfilerRule;
using profiler_rules_internal::NoIssues;
using profiler_rules_internal::ProfilerRuleBase;

// `seconds` since the epoch as UTC, to the tenth: 2026-11-21T22:35:00.0Z.
// gmtime_r rather than absl's time zones: absl loads zones lazily behind a
// lock Debian's abseil hides from TSan, and rules run on several threads.
std::string Ts(double seconds) {
  if (!std::isfinite(seconds) || std::fabs(seconds) > 1e15) return absl::StrCat(seconds);
  const int64_t tenths = std::llround(seconds * 10);
  int64_t whole = tenths / 10;
  int64_t tenth = tenths % 10;
  if (tenth < 0) tenth += 10, --whole;
  const time_t t = static_cast<time_t>(whole);
  struct tm utc;
  if (gmtime_r(&t, &utc) == nullptr) return absl::StrCat(seconds);
  char buffer[64];
  const size_t length = strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%S", &utc);
  return absl::StrCat(absl::string_view(buffer, length), ".", tenth, "Z");
}

std::string Pct(double v) { return absl::StrFormat("%.1f%%", v); }

// numpy.percentile's default (linear interpolation); reorders `v`. The two
// order statistics are selected, not sorted for (a window sort per check was
// a visible share of the bench).
double Percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  double pos = q / 100.0 * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, v.size() - 1);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(lo), v.end());
  const double low = v[lo];
  const double high =
      hi == lo ? low : *std::min_element(v.begin() + static_cast<std::ptrdiff_t>(hi), v.end());
  return low + (high - low) * (pos - static_cast<double>(lo));
}

double Percent(RuleParameterReader& p, absl::string_view name, double default_value) {
  return p.Float(name, default_value, 0, 100);
}

// Node, device: a series (MetricStrings order by text, so maps keyed by them
// iterate, and details list series, as with the std::string keys before).
using SeriesKey = std::pair<MetricString, MetricString>;

// Finds a rule's per-series (or per-node) state without a map search per
// point: the last key is remembered (points of one series often come in a
// row), then a hash of the interned pointers. `make` returns the state's
// stable address (an element of the rule's ordered map) on first sight.
template <typename Key, typename T>
class Memo {
 public:
  template <typename Make>
  T* Get(const Key& key, Make make) {
    if (last_ != nullptr && key == last_key_) return last_;
    auto [it, inserted] = memo_.try_emplace(key, nullptr);
    if (inserted) it->second = make();
    last_key_ = key;
    last_ = it->second;
    return last_;
  }

 private:
  absl::flat_hash_map<Key, T*> memo_;
  Key last_key_{};
  T* last_ = nullptr;
};

// "a; b; c" of the parts, cut at kMaxDetails.
void AppendPart(std::string* out, absl::string_view part) {
  if (out->size() >= kMaxDetails) return;
  absl::StrAppend(out, out->empty() ? "" : "; ", part);
}

// The system-metric rules' per-point loop, with Derived::OnPoint called
// directly (not virtual: inlined, and the dimension filter most rules start
// with costs a compare). OnPoint(point) returns whether the rule fired, its
// verdict given to Fire().
template <typename Derived>
class SystemRule : public ProfilerRuleBase {
 public:
  SystemRule() : ProfilerRuleBase(Input::kSystemMetrics) {}

  RuleVerdict OnMetrics(absl::Span<const SystemMetricPoint> points) final {
    Derived& self = static_cast<Derived&>(*this);
    return FeedPoints(points,
                      [&self](const SystemMetricPoint& point) { return self.OnPoint(point); });
  }
};

// A fixed-size window over one device's series, after `patience` points.
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
      : threshold_p95_(Percent(p, "threshold_p95", 70)),
        threshold_p5_(Percent(p, "threshold_p5", 10)),
        patience_(p.Int("patience", 1000, 0)),
        window_(p.Int("window", 500, 1, 10000000)) {
    CommonParameters(p);
  }
  std::string name() const override { return "LowGPUUtilization"; }

  bool OnPoint(const SystemMetricPoint& pt) {
    if (pt.dim != MetricDimension::kGpuUtilization) return false;
    const SeriesKey key(pt.node_id, pt.name);
    WindowedSeries& s = *memo_.Get(key, [&] { return &series_[key]; });
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
    for (auto& [key, s] : series_) {
      if (!s.window.empty() && static_cast<int64_t>(s.window.size()) * 2 >= window_) {
        RuleVerdict v = Evaluate(key.first, key.second, s);
        if (v.kind == RuleVerdict::Kind::kIssuesFound) return v;
      }
    }
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
        absl::StrAppend(&part, ", last p95 ", Pct(s.last_p95), " (threshold_p95 ",
                        Pct(threshold_p95_), "), p5 ", Pct(s.last_p5), " (threshold_p5 ",
                        Pct(threshold_p5_), ")");
      }
      AppendPart(&out, part);
    }
    return out;
  }

 private:
  RuleVerdict Evaluate(absl::string_view node, absl::string_view gpu, WindowedSeries& s) {
    scratch_ = s.window;
    const size_t n = scratch_.size();
    double p95 = Percentile(scratch_, 95);
    double p5 = Percentile(scratch_, 5);
    ++s.windows_done;
    s.last_p95 = p95, s.last_p5 = p5;
    std::string where =
        absl::StrCat(" over ", n, " points (", s.first_index, "-", s.first_index + n - 1,
                     " of that GPU) from ", Ts(s.first_ts), " to ", Ts(s.last_ts));
    s.window.clear();
    if (p95 < threshold_p95_) {
      ++violations_;
      return Issues(absl::StrCat("GPU utilization of ", gpu, " on ", node,
                                 " is low: 95th percentile ", Pct(p95), " below threshold_p95 ",
                                 Pct(threshold_p95_), where));
    }
    if (p5 < threshold_p5_) {
      ++violations_;
      return Issues(absl::StrCat("GPU utilization of ", gpu, " on ", node,
                                 " fluctuates: 5th percentile ", Pct(p5), " below threshold_p5 ",
                                 Pct(threshold_p5_), " while the 95th percentile is ", Pct(p95),
                                 " (threshold_p95 ", Pct(threshold_p95_), ")", where));
    }
    return RuleVerdict::Continue();
  }

  double threshold_p95_, threshold_p5_;
  int64_t patience_, window_;
  std::map<SeriesKey, WindowedSeries> series_;
  Memo<SeriesKey, WindowedSeries> memo_;
  std::vector<double> scratch_;  // A window's copy, sorted for percentiles.
  int64_t violations_ = 0;
};

// ---------------------------------------------------------------------------
// Per-node samples: the points of one node with the same timestamp form one
// sample (the reader gives them in file order; a point with another
// timestamp closes the node's current sample, OnEnd closes the last).
struct Sample {
  double timestamp = 0;
  double cpu_sum = 0;
  int cpu_n = 0;
  double gpu_max = 0;
  int gpu_n = 0;
  double io = 0;
  bool has_io = false;
};

// CPUBottleneck and IOBottleneck: per node, the first `patience` samples are
// skipped; each later sample that has the needed metrics is evaluated; the
// rule fires when bottlenecked samples / evaluated samples exceeds
// `threshold` percent, checked every kCheckEvery evaluated samples and at
// OnEnd. Decisions: a sample's CPU utilization is the mean over the node's
// cores (CPUUtilization of cpu0, cpu1, ...); its GPU counts as
// underutilized when every GPU of the node is below gpu_threshold (the
// highest GPUUtilization of the sample); samples without GPU metrics (or
// without I/OWaitPercentage for IOBottleneck) are not evaluated.
// Violations: bottlenecked samples (over all nodes).
class BottleneckRule : public SystemRule<BottleneckRule> {
 public:
  bool OnPoint(const SystemMetricPoint& pt) {
    Node& node = *memo_.Get(pt.node_id, [&] { return &nodes_[pt.node_id]; });
    if (node.open && node.current.timestamp != pt.timestamp) {
      const bool fired = Close(pt.node_id, node);
      node.current = Sample();
      node.open = false;
      if (fired) return true;
    }
    if (!node.open) node.current.timestamp = pt.timestamp, node.open = true;
    Sample& s = node.current;
    switch (pt.dim) {
      case MetricDimension::kCpuUtilization:
        s.cpu_sum += pt.value, ++s.cpu_n;
        break;
      case MetricDimension::kGpuUtilization:
        s.gpu_max = s.gpu_n == 0 ? pt.value : std::max(s.gpu_max, pt.value), ++s.gpu_n;
        break;
      case MetricDimension::kIoWaitPercentage:
        s.io = pt.value, s.has_io = true;
        break;
      default:
        break;
    }
    return false;
  }

  RuleVerdict End() override {
    for (auto& [id, node] : nodes_) {
      if (node.open) {
        node.open = false;
        Close(id, node);  // Counted; the check below covers it.
      }
    }
    for (auto& [id, node] : nodes_) {
      if (node.evaluated > 0) {
        RuleVerdict v = Check(id, node);
        if (v.kind == RuleVerdict::Kind::kIssuesFound) return v;
      }
    }
    std::string details;
    for (const auto& [id, node] : nodes_) {
      absl::StrAppend(&details, details.empty() ? "" : "; ", id.view(), ": ", node.samples,
                      " samples");
      if (node.evaluated == 0) {
        absl::StrAppend(&details, ", none evaluated (patience ", patience_, ", needs ", Needs(),
                        ")");
      } else {
        absl::StrAppend(&details, ", ", node.bottlenecks, " of ", node.evaluated, " evaluated (",
                        Pct(100.0 * static_cast<double>(node.bottlenecks) /
                            static_cast<double>(node.evaluated)),
                        ") bottlenecked, not above threshold ", Pct(threshold_));
      }
    }
    return NoIssues(details);
  }

  int64_t Violations() const override {
    int64_t n = 0;
    for (const auto& [id, node] : nodes_) n += node.bottlenecks;
    return n;
  }
  // E.g. "algo-1: CPU above 90.0% while GPU below 10.0% in 35 of 1700
  // evaluated samples (2.1%) so far; threshold 50.0%". The open sample is
  // not counted yet.
  std::string Progress() const override {
    std::string out;
    for (const auto& [id, node] : nodes_) {
      if (node.evaluated == 0) {
        AppendPart(&out, absl::StrCat(id.view(), ": ", node.samples,
                                      " samples, none evaluated yet "
                                      "(patience ",
                                      patience_, ", needs ", Needs(), ")"));
      } else {
        AppendPart(&out, absl::StrCat(id.view(), ": ", Condition(), " in ", node.bottlenecks,
                                      " of ", node.evaluated, " evaluated samples (",
                                      Pct(100.0 * static_cast<double>(node.bottlenecks) /
                                          static_cast<double>(node.evaluated)),
                                      ") so far; threshold ", Pct(threshold_)));
      }
    }
    return out;
  }

 protected:
  struct Node {
    Sample current;
    bool open = false;
    int64_t samples = 0, evaluated = 0, bottlenecks = 0;
    double first_ts = 0, last_ts = 0;          // Of the evaluated samples.
    double first_bad_ts = 0, last_bad_ts = 0;  // Of the bottlenecked ones.
    double bad_cpu_sum = 0, bad_gpu_sum = 0;   // Means for the details.
  };
  BottleneckRule(double threshold, int64_t patience) : threshold_(threshold), patience_(patience) {}
  // Whether `s` can be evaluated, and whether it is a bottleneck.
  virtual bool Usable(const Sample& s) const = 0;
  virtual bool Bottlenecked(const Sample& s) const = 0;
  virtual std::string Needs() const = 0;
  // The bottleneck condition in words ("CPU above 90.0% while GPU below
  // 10.0%").
  virtual std::string Condition() const = 0;
  virtual std::string Describe(absl::string_view node_id, const Node& node) const = 0;

  double threshold_;
  int64_t patience_;

 private:
  // Whether the check the closed sample triggered fired (its verdict given to Fire()).
  bool Close(absl::string_view id, Node& node) {
    ++node.samples;
    const Sample& s = node.current;
    if (node.samples <= patience_ || !Usable(s)) return false;
    if (node.evaluated == 0) node.first_ts = s.timestamp;
    node.last_ts = s.timestamp;
    ++node.evaluated;
    if (Bottlenecked(s)) {
      if (node.bottlenecks == 0) node.first_bad_ts = s.timestamp;
      node.last_bad_ts = s.timestamp;
      ++node.bottlenecks;
      node.bad_cpu_sum += s.cpu_n > 0 ? s.cpu_sum / s.cpu_n : 0;
      node.bad_gpu_sum += s.gpu_max;
    }
    if (node.evaluated % kCheckEvery != 0) return false;
    return Fire(Check(id, node));
  }
  RuleVerdict Check(absl::string_view id, const Node& node) {
    double ratio =
        100.0 * static_cast<double>(node.bottlenecks) / static_cast<double>(node.evaluated);
    if (ratio > threshold_) return Issues(Describe(id, node));
    return RuleVerdict::Continue();
  }

  std::map<MetricString, Node> nodes_;
  Memo<MetricString, Node> memo_;
};

std::string BadShare(const char* what, int64_t bad, int64_t evaluated, double threshold) {
  return absl::StrCat(what, " in ", bad, " of ", evaluated, " samples (",
                      Pct(100.0 * static_cast<double>(bad) / static_cast<double>(evaluated)),
                      ", above threshold ", Pct(threshold), ")");
}

class CpuBottleneck : public BottleneckRule {
 public:
  explicit CpuBottleneck(RuleParameterReader& p)
      : BottleneckRule(Percent(p, "threshold", 50), p.Int("patience", 100, 0)),
        gpu_threshold_(Percent(p, "gpu_threshold", 10)),
        cpu_threshold_(Percent(p, "cpu_threshold", 90)) {
    CommonParameters(p);
  }
  std::string name() const override { return "CPUBottleneck"; }

 protected:
  bool Usable(const Sample& s) const override { return s.cpu_n > 0 && s.gpu_n > 0; }
  bool Bottlenecked(const Sample& s) const override {
    return s.cpu_sum / s.cpu_n > cpu_threshold_ && s.gpu_max < gpu_threshold_;
  }
  std::string Needs() const override { return "CPUUtilization and GPUUtilization"; }
  std::string Condition() const override {
    return absl::StrCat("CPU above ", Pct(cpu_threshold_), " while GPU below ",
                        Pct(gpu_threshold_));
  }
  std::string Describe(absl::string_view id, const Node& n) const override {
    return absl::StrCat(
        "CPU bottleneck on ", id, ": CPU utilization (mean over cores) above cpu_threshold ",
        Pct(cpu_threshold_), " while GPU utilization was below gpu_threshold ", Pct(gpu_threshold_),
        BadShare("", n.bottlenecks, n.evaluated, threshold_), " after patience ", patience_,
        "; bottlenecked from ", Ts(n.first_bad_ts), " to ", Ts(n.last_bad_ts), ", mean CPU ",
        Pct(n.bad_cpu_sum / static_cast<double>(n.bottlenecks)), ", mean GPU ",
        Pct(n.bad_gpu_sum / static_cast<double>(n.bottlenecks)), " in those samples (evaluated ",
        Ts(n.first_ts), " to ", Ts(n.last_ts), ")");
  }

 private:
  double gpu_threshold_, cpu_threshold_;
};

class IoBottleneck : public BottleneckRule {
 public:
  explicit IoBottleneck(RuleParameterReader& p)
      : BottleneckRule(Percent(p, "threshold", 50), p.Int("patience", 1000, 0)),
        gpu_threshold_(Percent(p, "gpu_threshold", 70)),
        io_threshold_(Percent(p, "io_threshold", 50)) {
    CommonParameters(p);
  }
  std::string name() const override { return "IOBottleneck"; }

 protected:
  bool Usable(const Sample& s) const override { return s.has_io && s.gpu_n > 0; }
  bool Bottlenecked(const Sample& s) const override {
    return s.io > io_threshold_ && s.gpu_max < gpu_threshold_;
  }
  std::string Needs() const override { return "I/OWaitPercentage and GPUUtilization"; }
  std::string Condition() const override {
    return absl::StrCat("I/O wait above ", Pct(io_threshold_), " while GPU below ",
                        Pct(gpu_threshold_));
  }
  std::string Describe(absl::string_view id, const Node& n) const override {
    return absl::StrCat(
        "I/O bottleneck on ", id, ": I/O wait above io_threshold ", Pct(io_threshold_),
        " while GPU utilization was below gpu_threshold ", Pct(gpu_threshold_),
        BadShare("", n.bottlenecks, n.evaluated, threshold_), " after patience ", patience_,
        "; bottlenecked from ", Ts(n.first_bad_ts), " to ", Ts(n.last_bad_ts), ", mean GPU ",
        Pct(n.bad_gpu_sum / static_cast<double>(n.bottlenecks)), " in those samples (evaluated ",
        Ts(n.first_ts), " to ", Ts(n.last_ts), ")");
  }

 private:
  double gpu_threshold_, io_threshold_;
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
      : increase_(Percent(p, "increase", 10)),
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
    Series& s = *memo_.Get(key, [&] { return &series_[key]; });
    ++s.seen;
    if (s.seen <= patience_) return false;
    if (s.n == 0) s.first_ts = pt.timestamp;
    s.sum += pt.value, ++s.n, s.last_ts = pt.timestamp;
    if (s.n < window_) return false;
    return Fire(CloseWindow(pt.node_id, pt.name, s));
  }

  RuleVerdict End() override {
    if (series_.empty()) return NoIssues("no GPUMemoryUtilization metrics (no GPU seen)");
    for (auto& [key, s] : series_) {
      if (s.n > 0 && s.n * 2 >= window_) {
        RuleVerdict v = CloseWindow(key.first, key.second, s);
        if (v.kind == RuleVerdict::Kind::kIssuesFound) return v;
      }
    }
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
                        absl::StrFormat("%.1f", s.max_step), then, Pct(increase_));
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
        v = Issues(absl::StrCat("GPU memory utilization of ", gpu, " on ", node, " increased by ",
                                absl::StrFormat("%.1f", step), " points (more than increase ",
                                Pct(increase_), "): mean ", Pct(s.prev_mean), " over ", window_,
                                " points from ", Ts(s.prev_first_ts), " to ", Ts(s.prev_last_ts),
                                ", then mean ", Pct(mean), " over ", s.n, " points from ",
                                Ts(s.first_ts), " to ", Ts(s.last_ts)));
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
  Memo<SeriesKey, Series> memo_;
  int64_t violations_ = 0;
};

// ---------------------------------------------------------------------------
// OverallSystemUsage: the docs say it "only aggregates values per node and
// computes their percentiles". Decision: it never reports IssuesFound (no
// violations); OnEnd is NoIssuesFound whose details give, per node and
// dimension (all cores / GPUs of a dimension together), p50/p95/p99 and max
// (Finding() gives the same so far). Percentiles come from a 0.1-point
// histogram over [0, 100] (values outside are clamped), so memory stays
// constant however long the run.
class OverallSystemUsage : public SystemRule<OverallSystemUsage> {
 public:
  friend class SystemRule<OverallSystemUsage>;
  explicit OverallSystemUsage(RuleParameterReader& p) { CommonParameters(p); }
  std::string name() const override { return "OverallSystemUsage"; }

 protected:
  static constexpr int kBins = 1001;
  struct Histogram {
    std::array<int64_t, kBins> bins{};
    int64_t n = 0;
    double max = -1e300;
  };
  bool OnPoint(const SystemMetricPoint& pt) {
    Histogram& h = Find(pt);
    // std::lround(x) for x in [0, 1000], without the libm call: x - whole
    // is exact (Sterbenz), so this rounds half away from zero as lround.
    const double x = std::clamp(pt.value, 0.0, 100.0) * 10;
    size_t bin = static_cast<size_t>(x);
    if (x - static_cast<double>(bin) >= 0.5) ++bin;
    ++h.bins[bin];
    ++h.n;
    h.max = std::max(h.max, pt.value);
    return false;
  }
  RuleVerdict End() override { return NoIssues(Summary()); }
  int64_t Violations() const override { return 0; }
  std::string Progress() const override { return Summary(); }

 private:
  // The points of a node cycle through its dimensions, so the memo's
  // last-key check rarely hits: the known dimensions of the last node are
  // kept by MetricDimension (checked against the dimension text).
  Histogram& Find(const SystemMetricPoint& pt) {
    const SeriesKey key(pt.node_id, pt.dimension);
    auto make = [&] { return &usage_[key]; };
    if (pt.dim == MetricDimension::kOther) return *memo_.Get(key, make);
    if (pt.node_id != cached_node_) {
      cached_node_ = pt.node_id;
      by_dim_.fill(ByDim{});
    }
    ByDim& slot = by_dim_[static_cast<size_t>(pt.dim)];
    if (slot.histogram == nullptr || slot.dimension != pt.dimension) {
      slot.dimension = pt.dimension;
      slot.histogram = memo_.Get(key, make);
    }
    return *slot.histogram;
  }

  std::string Summary() const {
    std::string details;
    MetricString last_node;
    bool first = true;
    for (const auto& [key, h] : usage_) {
      if (first || key.first != last_node) {
        absl::StrAppend(&details, details.empty() ? "" : "; ", key.first.view(), ":");
        last_node = key.first;
        first = false;
      } else {
        absl::StrAppend(&details, ",");
      }
      absl::StrAppend(&details, " ", key.second.view(), " p50 ", Pct(Quantile(h, 50)), " p95 ",
                      Pct(Quantile(h, 95)), " p99 ", Pct(Quantile(h, 99)), " max ", Pct(h.max));
    }
    return details;
  }
  static double Quantile(const Histogram& h, double q) {
    int64_t rank = static_cast<int64_t>(std::ceil(q / 100.0 * static_cast<double>(h.n)));
    rank = std::max<int64_t>(rank, 1);
    int64_t acc = 0;
    for (int i = 0; i < kBins; ++i) {
      acc += h.bins[i];
      if (acc >= rank) return i / 10.0;
    }
    return 100;
  }
  std::map<SeriesKey, Histogram> usage_;
  Memo<SeriesKey, Histogram> memo_;
  struct ByDim {
    MetricString dimension;
    Histogram* histogram = nullptr;
  };
  MetricString cached_node_;
  std::array<ByDim, static_cast<size_t>(MetricDimension::kOther)> by_dim_{};
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
    const Where& w = *memo_.Get(SeriesKey(pt.node_id, pt.name), [&] {
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
    for (const auto& [node, gpus] : nodes_) {
      RuleVerdict v = Check(node, gpus, 1);
      if (v.kind == RuleVerdict::Kind::kIssuesFound) return v;
    }
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
              " (mean utilization ", Pct(ga.sum / static_cast<double>(ga.n)), " over ", ga.n,
              " points) and ", b->first.view(), " (mean ", Pct(gb.sum / static_cast<double>(gb.n)),
              " over ", gb.n, " points): histogram distance ", absl::StrFormat("%.2f", d),
              " above threshold ", absl::StrFormat("%g", threshold_), ", from ",
              Ts(std::min(ga.first_ts, gb.first_ts)), " to ", Ts(std::max(ga.last_ts, gb.last_ts)),
              " after patience ", patience_));
        }
      }
    }
    return RuleVerdict::Continue();
  }

  double threshold_;
  int64_t patience_;
  std::map<MetricString, Gpus> nodes_;
  std::map<MetricString, double> max_distance_;
  std::deque<Where> where_;  // Stable addresses for memo_.
  Memo<SeriesKey, Where> memo_;
  int64_t violations_ = 0;
};

// ---------------------------------------------------------------------------
// BatchSize: CPU, GPU and GPU memory all lightly used, so a larger batch (or
// a smaller instance) would fit. Per node, samples as for CPUBottleneck (the
// node's points with one timestamp; a sample's CPU utilization is the mean
// over the node's cores, as upstream's rule averages the cores); each GPU
// (Name) of the sample contributes its GPUUtilization and
// GPUMemoryUtilization. The first `patience` samples of a node are skipped;
// then the samples that have CPU utilization fill non-overlapping windows of
// `window` samples, each evaluated when full: p95 of the window's CPU
// values, and per GPU the p95 of its utilization and of its memory
// utilization over the same samples. IssuesFound when CPU p95 <
// cpu_threshold_p95 and, for some GPU of the node, GPU p95 <
// gpu_threshold_p95 and memory p95 < gpu_memory_threshold_p95.
// Decisions: a GPU is judged in a window only when it has both metrics in at
// least half of the window's samples (a GPU without memory metrics is never
// judged); at OnEnd a trailing window of at least half a window is evaluated
// too (as LowGPUUtilization); a node without GPU metrics never fires (the
// rule is about underused GPUs). Violations: (window, GPU) pairs where all
// three were low.
class BatchSize : public SystemRule<BatchSize> {
 public:
  friend class SystemRule<BatchSize>;
  explicit BatchSize(RuleParameterReader& p)
      : cpu_threshold_(Percent(p, "cpu_threshold_p95", 70)),
        gpu_threshold_(Percent(p, "gpu_threshold_p95", 70)),
        memory_threshold_(Percent(p, "gpu_memory_threshold_p95", 70)),
        patience_(p.Int("patience", 100, 0)),
        window_(p.Int("window", 500, 1, 10000000)) {
    CommonParameters(p);
  }
  std::string name() const override { return "BatchSize"; }

 protected:
  struct GpuWindow {
    std::vector<double> utilization, memory;
    double last_util_p95 = -1, last_memory_p95 = -1;  // -1: not judged yet.
  };
  struct Node {
    // The open sample.
    bool open = false;
    double timestamp = 0, cpu_sum = 0;
    int cpu_n = 0;
    std::vector<std::pair<MetricString, double>> gpu_util, gpu_memory;
    // The window.
    int64_t samples = 0, windows = 0;
    std::vector<double> cpu;
    double first_ts = 0, last_ts = 0;
    std::map<MetricString, GpuWindow> gpus;
    double last_cpu_p95 = -1;
  };

  bool OnPoint(const SystemMetricPoint& pt) {
    Node& node = *memo_.Get(pt.node_id, [&] { return &nodes_[pt.node_id]; });
    if (node.open && node.timestamp != pt.timestamp && Fire(Close(pt.node_id, node))) return true;
    if (!node.open) node.open = true, node.timestamp = pt.timestamp;
    switch (pt.dim) {
      case MetricDimension::kCpuUtilization:
        node.cpu_sum += pt.value, ++node.cpu_n;
        break;
      case MetricDimension::kGpuUtilization:
        node.gpu_util.emplace_back(pt.name, pt.value);
        break;
      case MetricDimension::kGpuMemoryUtilization:
        node.gpu_memory.emplace_back(pt.name, pt.value);
        break;
      default:
        break;
    }
    return false;
  }

  RuleVerdict End() override {
    for (auto& [id, node] : nodes_) {
      if (node.open) {
        RuleVerdict v = Close(id, node);
        if (v.kind == RuleVerdict::Kind::kIssuesFound) return v;
      }
      if (!node.cpu.empty() && static_cast<int64_t>(node.cpu.size()) * 2 >= window_) {
        RuleVerdict v = Evaluate(id, node);
        if (v.kind == RuleVerdict::Kind::kIssuesFound) return v;
      }
    }
    return NoIssues(Summary(/*so_far=*/false));
  }

  int64_t Violations() const override { return violations_; }
  std::string Progress() const override { return Summary(/*so_far=*/true); }

 private:
  // Per node: samples, windows, the last window's percentiles.
  std::string Summary(bool so_far) const {
    std::string out;
    for (const auto& [id, node] : nodes_) {
      std::string part = absl::StrCat(id.view(), ": ", node.samples, " samples, ", node.windows,
                                      " windows of ", window_, " after patience ", patience_);
      if (node.gpus.empty()) absl::StrAppend(&part, ", no GPU metrics");
      if (node.last_cpu_p95 >= 0) {
        absl::StrAppend(&part, "; last window CPU p95 ", Pct(node.last_cpu_p95));
        for (const auto& [gpu, g] : node.gpus) {
          if (g.last_util_p95 < 0) continue;
          absl::StrAppend(&part, ", ", gpu.view(), " p95 ", Pct(g.last_util_p95), " memory p95 ",
                          Pct(g.last_memory_p95));
        }
      }
      AppendPart(&out, part);
    }
    absl::StrAppend(&out, so_far ? " so far" : "", "; thresholds: CPU p95 ", Pct(cpu_threshold_),
                    ", GPU p95 ", Pct(gpu_threshold_), ", GPU memory p95 ", Pct(memory_threshold_),
                    so_far ? "" : ", not all three below at once");
    return out;
  }

  // Closes the node's open sample; evaluates the window when it fills.
  RuleVerdict Close(absl::string_view id, Node& node) {
    node.open = false;
    ++node.samples;
    RuleVerdict v = RuleVerdict::Continue();
    if (node.samples > patience_ && node.cpu_n > 0) {
      if (node.cpu.empty()) node.first_ts = node.timestamp;
      node.last_ts = node.timestamp;
      node.cpu.push_back(node.cpu_sum / node.cpu_n);
      for (const auto& [gpu, value] : node.gpu_util) node.gpus[gpu].utilization.push_back(value);
      for (const auto& [gpu, value] : node.gpu_memory) node.gpus[gpu].memory.push_back(value);
      if (static_cast<int64_t>(node.cpu.size()) >= window_) v = Evaluate(id, node);
    }
    node.cpu_sum = 0, node.cpu_n = 0;
    node.gpu_util.clear(), node.gpu_memory.clear();
    return v;
  }

  RuleVerdict Evaluate(absl::string_view id, Node& node) {
    const size_t n = node.cpu.size();
    const double cpu_p95 = Percentile(node.cpu, 95);
    node.last_cpu_p95 = cpu_p95;
    ++node.windows;
    std::string found;
    for (auto& [gpu, g] : node.gpus) {
      if (g.utilization.size() * 2 < n || g.memory.size() * 2 < n) {
        g.utilization.clear(), g.memory.clear();
        continue;
      }
      g.last_util_p95 = Percentile(g.utilization, 95);
      g.last_memory_p95 = Percentile(g.memory, 95);
      g.utilization.clear(), g.memory.clear();
      if (cpu_p95 < cpu_threshold_ && g.last_util_p95 < gpu_threshold_ &&
          g.last_memory_p95 < memory_threshold_) {
        ++violations_;
        absl::StrAppend(&found, found.empty() ? "" : ", ", gpu.view(), " utilization p95 ",
                        Pct(g.last_util_p95), " and memory p95 ", Pct(g.last_memory_p95));
      }
    }
    node.cpu.clear();
    if (found.empty()) return RuleVerdict::Continue();
    return Issues(absl::StrCat(
        "CPU, GPU and GPU memory all lightly used on ", id, " (batch size may be too small): ",
        found, " below gpu_threshold_p95 ", Pct(gpu_threshold_), " and gpu_memory_threshold_p95 ",
        Pct(memory_threshold_), ", CPU utilization (mean over cores) p95 ", Pct(cpu_p95),
        " below cpu_threshold_p95 ", Pct(cpu_threshold_), "; over ", n, " samples from ",
        Ts(node.first_ts), " to ", Ts(node.last_ts), " after patience ", patience_));
  }

  double cpu_threshold_, gpu_threshold_, memory_threshold_;
  int64_t patience_, window_;
  std::map<MetricString, Node> nodes_;
  Memo<MetricString, Node> memo_;
  int64_t violations_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ProfilerRule>> CreateProfilerRule(const std::string& name,
                                                                 const RuleParameters& parameters) {
  if (name == "LowGPUUtilization") return MakeProfilerRule<LowGpuUtilization>(name, parameters);
  if (name == "CPUBottleneck") return MakeProfilerRule<CpuBottleneck>(name, parameters);
  if (name == "IOBottleneck") return MakeProfilerRule<IoBottleneck>(name, parameters);
  if (name == "GPUMemoryIncrease") return MakeProfilerRule<GpuMemoryIncrease>(name, parameters);
  if (name == "OverallSystemUsage") return MakeProfilerRule<OverallSystemUsage>(name, parameters);
  if (name == "LoadBalancing") return MakeProfilerRule<LoadBalancing>(name, parameters);
  if (name == "BatchSize") return MakeProfilerRule<BatchSize>(name, parameters);
  for (const std::string& framework_rule : FrameworkProfilerRuleNames()) {
    if (name == framework_rule) return CreateFrameworkProfilerRule(name, parameters);
  }
  return absl::NotFoundError(absl::StrCat("unknown profiler rule '", name,
                                          "'; known: ", absl::StrJoin(ProfilerRuleNames(), ", ")));
}

std::vector<std::string> ProfilerRuleNames() {
  std::vector<std::string> names = {"BatchSize",         "CPUBottleneck", "GPUMemoryIncrease",
                                    "IOBottleneck",      "LoadBalancing", "LowGPUUtilization",
                                    "OverallSystemUsage"};
  for (std::string& name : FrameworkProfilerRuleNames()) names.push_back(std::move(name));
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace debugplane::rules_engine
