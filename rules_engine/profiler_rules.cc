#include "rules_engine/profiler_rules.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <ctime>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "rules_engine/framework_rules.h"
#include "rules_engine/rule_parameters.h"

namespace debugplane::rules_engine {
namespace {

constexpr size_t kMaxDetails = 1024;

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

RuleVerdict Issues(std::string details) {
  if (details.size() > kMaxDetails) details.resize(kMaxDetails);
  return RuleVerdict::Issues(std::move(details));
}
RuleVerdict NoIssues(std::string details) {
  if (details.size() > kMaxDetails) details.resize(kMaxDetails);
  return RuleVerdict::NoIssues(std::move(details));
}

// numpy.percentile's default (linear interpolation); sorts `v`.
double Percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double pos = q / 100.0 * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// Declares the parameters every profiler rule takes.
void CommonParameters(RuleParameterReader& p) {
  p.Int("scan_interval_us", 60000000, 1);
}

double Percent(RuleParameterReader& p, absl::string_view name, double default_value) {
  return p.Float(name, default_value, 0, 100);
}

// Base: sticky terminal verdict, "no data at all" at the end.
class ProfilerRuleBase : public ProfilerRule {
 public:
  RuleVerdict OnMetrics(absl::Span<const SystemMetricPoint> points) final {
    if (done_) return final_;
    points_seen_ += static_cast<int64_t>(points.size());
    for (const SystemMetricPoint& point : points) {
      RuleVerdict v = OnPoint(point);
      if (v.kind == RuleVerdict::Kind::kIssuesFound) return Conclude(std::move(v));
    }
    return RuleVerdict::Continue();
  }
  RuleVerdict OnEnd() final {
    if (done_) return final_;
    if (points_seen_ == 0) {
      return Conclude(RuleVerdict::Error(
          "no system metrics were read (the profiler's system/incremental directory is missing "
          "or empty)"));
    }
    return Conclude(End());
  }
  ProfilerRuleFinding Finding() const override {
    ProfilerRuleFinding finding;
    finding.rule = name();
    finding.parameters = parameters_;
    finding.datapoints = points_seen_;
    if (done_) {
      finding.status = final_.kind;
      finding.details = final_.details;
    } else {
      finding.details = absl::StrCat(points_seen_, " system metric points evaluated so far");
    }
    return finding;
  }
  // The parameters as the rule uses them (RuleParameterReader::resolved).
  void set_parameters(std::map<std::string, std::string> parameters) {
    parameters_ = std::move(parameters);
  }

 protected:
  virtual RuleVerdict OnPoint(const SystemMetricPoint& point) = 0;
  virtual RuleVerdict End() = 0;

 private:
  RuleVerdict Conclude(RuleVerdict v) {
    done_ = true;
    final_ = v;
    return v;
  }
  bool done_ = false;
  RuleVerdict final_;
  int64_t points_seen_ = 0;
  std::map<std::string, std::string> parameters_;
};

// A fixed-size window over one device's series, after `patience` points.
struct WindowedSeries {
  int64_t seen = 0;
  std::vector<double> window;
  double first_ts = 0, last_ts = 0;
  int64_t first_index = 0;  // 1-based index in the series of window[0].
  int windows_done = 0;
};

// ---------------------------------------------------------------------------
// LowGPUUtilization. Per GPU (node, Name) of GPUUtilization: the first
// `patience` points are skipped, then non-overlapping windows of `window`
// points are evaluated as they fill: p95 < threshold_p95 -> underutilized;
// otherwise p5 < threshold_p5 -> fluctuating (the docs' "p95 above
// threshold_p95 and p5 below threshold_p5"; p95 == threshold counts as
// above). Decision: at OnEnd a trailing partial window is evaluated too if it
// holds at least half a window (a run just past patience still gets judged).
class LowGpuUtilization : public ProfilerRuleBase {
 public:
  explicit LowGpuUtilization(RuleParameterReader& p)
      : threshold_p95_(Percent(p, "threshold_p95", 70)),
        threshold_p5_(Percent(p, "threshold_p5", 10)),
        patience_(p.Int("patience", 1000, 0)),
        window_(p.Int("window", 500, 1, 10000000)) {
    CommonParameters(p);
  }
  std::string name() const override { return "LowGPUUtilization"; }

 protected:
  RuleVerdict OnPoint(const SystemMetricPoint& pt) override {
    if (pt.dim != MetricDimension::kGpuUtilization) return RuleVerdict::Continue();
    WindowedSeries& s = series_[{pt.node_id, pt.name}];
    ++s.seen;
    if (s.seen <= patience_) return RuleVerdict::Continue();
    if (s.window.empty()) s.first_ts = pt.timestamp, s.first_index = s.seen;
    s.window.push_back(pt.value);
    s.last_ts = pt.timestamp;
    if (static_cast<int64_t>(s.window.size()) < window_) return RuleVerdict::Continue();
    return Evaluate(pt.node_id, pt.name, s);
  }

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
      absl::StrAppend(&details, details.empty() ? "" : "; ", key.second, " on ", key.first, ": ",
                      s.seen, " points, ", s.windows_done, " windows of ", window_,
                      " evaluated after patience ", patience_);
    }
    return NoIssues(details);
  }

 private:
  RuleVerdict Evaluate(const std::string& node, const std::string& gpu, WindowedSeries& s) {
    std::vector<double> v = s.window;
    const size_t n = v.size();
    double p95 = Percentile(v, 95);
    double p5 = Percentile(v, 5);
    ++s.windows_done;
    std::string where =
        absl::StrCat(" over ", n, " points (", s.first_index, "-", s.first_index + n - 1,
                     " of that GPU) from ", Ts(s.first_ts), " to ", Ts(s.last_ts));
    s.window.clear();
    if (p95 < threshold_p95_) {
      return Issues(absl::StrCat("GPU utilization of ", gpu, " on ", node,
                                 " is low: 95th percentile ", Pct(p95),
                                 " below threshold_p95 ", Pct(threshold_p95_), where));
    }
    if (p5 < threshold_p5_) {
      return Issues(absl::StrCat("GPU utilization of ", gpu, " on ", node,
                                 " fluctuates: 5th percentile ", Pct(p5), " below threshold_p5 ",
                                 Pct(threshold_p5_), " while the 95th percentile is ", Pct(p95),
                                 " (threshold_p95 ", Pct(threshold_p95_), ")", where));
    }
    return RuleVerdict::Continue();
  }

  double threshold_p95_, threshold_p5_;
  int64_t patience_, window_;
  std::map<std::pair<std::string, std::string>, WindowedSeries> series_;
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
class BottleneckRule : public ProfilerRuleBase {
 public:
  RuleVerdict OnPoint(const SystemMetricPoint& pt) override {
    Node& node = nodes_[pt.node_id];
    if (node.open && node.current.timestamp != pt.timestamp) {
      RuleVerdict v = Close(pt.node_id, node);
      node.current = Sample();
      node.open = false;
      if (v.kind == RuleVerdict::Kind::kIssuesFound) return v;
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
    return RuleVerdict::Continue();
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
      absl::StrAppend(&details, details.empty() ? "" : "; ", id, ": ", node.samples, " samples");
      if (node.evaluated == 0) {
        absl::StrAppend(&details, ", none evaluated (patience ", patience_, ", needs ", Needs(),
                        ")");
      } else {
        absl::StrAppend(&details, ", ", node.bottlenecks, " of ", node.evaluated, " evaluated (",
                        Pct(100.0 * node.bottlenecks / node.evaluated),
                        ") bottlenecked, not above threshold ", Pct(threshold_));
      }
    }
    return NoIssues(details);
  }

 protected:
  struct Node {
    Sample current;
    bool open = false;
    int64_t samples = 0, evaluated = 0, bottlenecks = 0;
    double first_ts = 0, last_ts = 0;            // Of the evaluated samples.
    double first_bad_ts = 0, last_bad_ts = 0;    // Of the bottlenecked ones.
    double bad_cpu_sum = 0, bad_gpu_sum = 0;     // Means for the details.
  };
  BottleneckRule(double threshold, int64_t patience) : threshold_(threshold), patience_(patience) {}
  // Whether `s` can be evaluated, and whether it is a bottleneck.
  virtual bool Usable(const Sample& s) const = 0;
  virtual bool Bottlenecked(const Sample& s) const = 0;
  virtual std::string Needs() const = 0;
  virtual std::string Describe(const std::string& node_id, const Node& node) const = 0;

  double threshold_;
  int64_t patience_;

 private:
  RuleVerdict Close(const std::string& id, Node& node) {
    ++node.samples;
    const Sample& s = node.current;
    if (node.samples <= patience_ || !Usable(s)) return RuleVerdict::Continue();
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
    if (node.evaluated % kCheckEvery != 0) return RuleVerdict::Continue();
    return Check(id, node);
  }
  RuleVerdict Check(const std::string& id, const Node& node) {
    double ratio = 100.0 * static_cast<double>(node.bottlenecks) / node.evaluated;
    if (ratio > threshold_) return Issues(Describe(id, node));
    return RuleVerdict::Continue();
  }

  std::map<std::string, Node> nodes_;
};

std::string BadShare(const char* what, int64_t bad, int64_t evaluated, double threshold) {
  return absl::StrCat(what, " in ", bad, " of ", evaluated, " samples (",
                      Pct(100.0 * bad / evaluated), ", above threshold ", Pct(threshold), ")");
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
  std::string Describe(const std::string& id, const Node& n) const override {
    return absl::StrCat(
        "CPU bottleneck on ", id, ": CPU utilization (mean over cores) above cpu_threshold ",
        Pct(cpu_threshold_), " while GPU utilization was below gpu_threshold ",
        Pct(gpu_threshold_), BadShare("", n.bottlenecks, n.evaluated, threshold_),
        " after patience ", patience_, "; bottlenecked from ", Ts(n.first_bad_ts), " to ",
        Ts(n.last_bad_ts), ", mean CPU ", Pct(n.bad_cpu_sum / n.bottlenecks), ", mean GPU ",
        Pct(n.bad_gpu_sum / n.bottlenecks), " in those samples (evaluated ", Ts(n.first_ts),
        " to ", Ts(n.last_ts), ")");
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
  std::string Describe(const std::string& id, const Node& n) const override {
    return absl::StrCat("I/O bottleneck on ", id, ": I/O wait above io_threshold ",
                        Pct(io_threshold_), " while GPU utilization was below gpu_threshold ",
                        Pct(gpu_threshold_), BadShare("", n.bottlenecks, n.evaluated, threshold_),
                        " after patience ", patience_, "; bottlenecked from ", Ts(n.first_bad_ts),
                        " to ", Ts(n.last_bad_ts), ", mean GPU ",
                        Pct(n.bad_gpu_sum / n.bottlenecks), " in those samples (evaluated ",
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
// too.
class GpuMemoryIncrease : public ProfilerRuleBase {
 public:
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

  RuleVerdict OnPoint(const SystemMetricPoint& pt) override {
    if (pt.dim != MetricDimension::kGpuMemoryUtilization) return RuleVerdict::Continue();
    Series& s = series_[{pt.node_id, pt.name}];
    ++s.seen;
    if (s.seen <= patience_) return RuleVerdict::Continue();
    if (s.n == 0) s.first_ts = pt.timestamp;
    s.sum += pt.value, ++s.n, s.last_ts = pt.timestamp;
    if (s.n < window_) return RuleVerdict::Continue();
    return CloseWindow(pt.node_id, pt.name, s);
  }

  RuleVerdict End() override {
    if (series_.empty()) return NoIssues("no GPUMemoryUtilization metrics (no GPU seen)");
    for (auto& [key, s] : series_) {
      if (s.n > 0 && s.n * 2 >= window_) {
        RuleVerdict v = CloseWindow(key.first, key.second, s);
        if (v.kind == RuleVerdict::Kind::kIssuesFound) return v;
      }
    }
    std::string details;
    for (const auto& [key, s] : series_) {
      absl::StrAppend(&details, details.empty() ? "" : "; ", key.second, " on ", key.first, ": ",
                      s.windows, " windows of ", window_, " after patience ", patience_);
      if (s.windows >= 2) {
        absl::StrAppend(&details, ", largest increase between windows ",
                        absl::StrFormat("%.1f", s.max_step), " points, not above increase ",
                        Pct(increase_));
      } else {
        absl::StrAppend(&details, ", too few to compare");
      }
    }
    return NoIssues(details);
  }

 private:
  RuleVerdict CloseWindow(const std::string& node, const std::string& gpu, Series& s) {
    double mean = s.sum / static_cast<double>(s.n);
    ++s.windows;
    RuleVerdict v = RuleVerdict::Continue();
    if (s.has_prev) {
      double step = mean - s.prev_mean;
      s.max_step = std::max(s.max_step, step);
      if (step > increase_) {
        v = Issues(absl::StrCat(
            "GPU memory utilization of ", gpu, " on ", node, " increased by ",
            absl::StrFormat("%.1f", step), " points (more than increase ", Pct(increase_),
            "): mean ", Pct(s.prev_mean), " over ", window_, " points from ", Ts(s.prev_first_ts),
            " to ", Ts(s.prev_last_ts), ", then mean ", Pct(mean), " over ", s.n,
            " points from ", Ts(s.first_ts), " to ", Ts(s.last_ts)));
      }
    }
    s.has_prev = true;
    s.prev_mean = mean, s.prev_first_ts = s.first_ts, s.prev_last_ts = s.last_ts;
    s.sum = 0, s.n = 0;
    return v;
  }

  double increase_;
  int64_t patience_, window_;
  std::map<std::pair<std::string, std::string>, Series> series_;
};

// ---------------------------------------------------------------------------
// OverallSystemUsage: the docs say it "only aggregates values per node and
// computes their percentiles". Decision: it never reports IssuesFound; OnEnd
// is NoIssuesFound whose details give, per node and dimension (all cores /
// GPUs of a dimension together), p50/p95/p99 and max. Percentiles come from
// a 0.1-point histogram over [0, 100] (values outside are clamped), so
// memory stays constant however long the run.
class OverallSystemUsage : public ProfilerRuleBase {
 public:
  explicit OverallSystemUsage(RuleParameterReader& p) { CommonParameters(p); }
  std::string name() const override { return "OverallSystemUsage"; }

 protected:
  static constexpr int kBins = 1001;
  struct Histogram {
    std::array<int64_t, kBins> bins{};
    int64_t n = 0;
    double max = -1e300;
  };
  RuleVerdict OnPoint(const SystemMetricPoint& pt) override {
    Histogram& h = usage_[{pt.node_id, pt.dimension}];
    double v = std::clamp(pt.value, 0.0, 100.0);
    ++h.bins[static_cast<size_t>(std::lround(v * 10))];
    ++h.n;
    h.max = std::max(h.max, pt.value);
    return RuleVerdict::Continue();
  }
  RuleVerdict End() override {
    std::string details;
    std::string last_node;
    for (const auto& [key, h] : usage_) {
      if (key.first != last_node) {
        absl::StrAppend(&details, details.empty() ? "" : "; ", key.first, ":");
        last_node = key.first;
      } else {
        absl::StrAppend(&details, ",");
      }
      absl::StrAppend(&details, " ", key.second, " p50 ", Pct(Quantile(h, 50)), " p95 ",
                      Pct(Quantile(h, 95)), " p99 ", Pct(Quantile(h, 99)), " max ",
                      Pct(h.max));
    }
    return NoIssues(details);
  }

 private:
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
  std::map<std::pair<std::string, std::string>, Histogram> usage_;
};

// ---------------------------------------------------------------------------
// LoadBalancing. Decision (the docs only say "workload percentage"): per
// node, each GPU's GPUUtilization after its first `patience` points goes
// into a histogram of 10 bins of 10 points; every kCheckEvery points of a GPU
// and at OnEnd, each pair of GPUs of the node that both have at least
// kCheckEvery evaluated points (at OnEnd: at least one) is compared by the
// total variation distance of their normalized histograms (0 = same
// workload distribution, 1 = disjoint); above `threshold` (0..1) fires.
// A node with one GPU is never imbalanced.
class LoadBalancing : public ProfilerRuleBase {
 public:
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
  RuleVerdict OnPoint(const SystemMetricPoint& pt) override {
    if (pt.dim != MetricDimension::kGpuUtilization) return RuleVerdict::Continue();
    std::map<std::string, Gpu>& gpus = nodes_[pt.node_id];
    Gpu& g = gpus[pt.name];
    ++g.seen;
    if (g.seen <= patience_) return RuleVerdict::Continue();
    if (g.n == 0) g.first_ts = pt.timestamp;
    ++g.n, g.sum += pt.value, g.last_ts = pt.timestamp;
    int bin = std::clamp(static_cast<int>(std::floor(pt.value / 10.0)), 0, 9);
    ++g.bins[bin];
    if (g.n % kCheckEvery != 0) return RuleVerdict::Continue();
    return Check(pt.node_id, gpus, kCheckEvery);
  }
  RuleVerdict End() override {
    if (nodes_.empty()) return NoIssues("no GPUUtilization metrics (no GPU seen)");
    for (const auto& [node, gpus] : nodes_) {
      RuleVerdict v = Check(node, gpus, 1);
      if (v.kind == RuleVerdict::Kind::kIssuesFound) return v;
    }
    std::string details;
    for (const auto& [node, gpus] : nodes_) {
      absl::StrAppend(&details, details.empty() ? "" : "; ", node, ": ", gpus.size(),
                      gpus.size() == 1 ? " GPU" : " GPUs", ", largest histogram distance ",
                      absl::StrFormat("%.2f", max_distance_[node]), ", not above threshold ",
                      absl::StrFormat("%g", threshold_));
    }
    return NoIssues(details);
  }

 private:
  RuleVerdict Check(const std::string& node, const std::map<std::string, Gpu>& gpus,
                    int64_t min_points) {
    double& max_d = max_distance_[node];
    for (auto a = gpus.begin(); a != gpus.end(); ++a) {
      if (a->second.n < min_points) continue;
      for (auto b = std::next(a); b != gpus.end(); ++b) {
        if (b->second.n < min_points) continue;
        double d = 0;
        for (int i = 0; i < 10; ++i) {
          d += std::fabs(static_cast<double>(a->second.bins[i]) / a->second.n -
                         static_cast<double>(b->second.bins[i]) / b->second.n);
        }
        d /= 2;
        max_d = std::max(max_d, d);
        if (d > threshold_) {
          const Gpu& ga = a->second;
          const Gpu& gb = b->second;
          return Issues(absl::StrCat(
              "workload imbalance on ", node, " between ", a->first, " (mean utilization ",
              Pct(ga.sum / ga.n), " over ", ga.n, " points) and ", b->first, " (mean ",
              Pct(gb.sum / gb.n), " over ", gb.n, " points): histogram distance ",
              absl::StrFormat("%.2f", d), " above threshold ", absl::StrFormat("%g", threshold_),
              ", from ", Ts(std::min(ga.first_ts, gb.first_ts)), " to ",
              Ts(std::max(ga.last_ts, gb.last_ts)), " after patience ", patience_));
        }
      }
    }
    return RuleVerdict::Continue();
  }

  double threshold_;
  int64_t patience_;
  std::map<std::string, std::map<std::string, Gpu>> nodes_;
  std::map<std::string, double> max_distance_;
};

template <typename T>
absl::StatusOr<std::unique_ptr<ProfilerRule>> Make(const std::string& name,
                                                   const RuleParameters& parameters) {
  RuleParameterReader p(name, parameters);
  auto rule = std::make_unique<T>(p);
  if (absl::Status s = p.status(); !s.ok()) return s;
  rule->set_parameters(p.resolved());
  return std::unique_ptr<ProfilerRule>(std::move(rule));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ProfilerRule>> CreateProfilerRule(
    const std::string& name, const RuleParameters& parameters) {
  if (name == "LowGPUUtilization") return Make<LowGpuUtilization>(name, parameters);
  if (name == "CPUBottleneck") return Make<CpuBottleneck>(name, parameters);
  if (name == "IOBottleneck") return Make<IoBottleneck>(name, parameters);
  if (name == "GPUMemoryIncrease") return Make<GpuMemoryIncrease>(name, parameters);
  if (name == "OverallSystemUsage") return Make<OverallSystemUsage>(name, parameters);
  if (name == "LoadBalancing") return Make<LoadBalancing>(name, parameters);
  for (const std::string& framework_rule : FrameworkProfilerRuleNames()) {
    if (name == framework_rule) return CreateFrameworkProfilerRule(name, parameters);
  }
  return absl::NotFoundError(absl::StrCat("unknown profiler rule '", name, "'; known: ",
                                          absl::StrJoin(ProfilerRuleNames(), ", ")));
}

std::vector<std::string> ProfilerRuleNames() {
  std::vector<std::string> names = {"CPUBottleneck",     "GPUMemoryIncrease",
                                    "IOBottleneck",      "LoadBalancing",
                                    "LowGPUUtilization", "OverallSystemUsage"};
  for (std::string& name : FrameworkProfilerRuleNames()) names.push_back(std::move(name));
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace debugplane::rules_engine
