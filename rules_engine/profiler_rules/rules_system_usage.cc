// The whole-system rules over system metrics: OverallSystemUsage (the
// percentiles per node and dimension) and BatchSize (CPU, GPU and GPU memory
// all lightly used).

#include <algorithm>
#include <array>
#include <iterator>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "rules_engine/profiler_rules/system_rule.h"
#include "rules_engine/rule/percentile.h"
#include "rules_engine/rule/rule_parameters.h"

namespace debugplane::rules_engine::profiler_rules_internal {
namespace {

// ---------------------------------------------------------------------------
// OverallSystemUsage: the docs say it "only aggregates values per node and
// computes their percentiles". Decision: it never reports IssuesFound (no
// violations); OnEnd is NoIssuesFound whose details give, per node and
// dimension (all cores / GPUs of a dimension together), p50/p95/p99 and max
// (Finding() gives the same so far). Percentiles come from a 0.1-point
// histogram over [0, 100] (values outside are clamped), so memory stays
// constant however long the run. Rates (dimensions ending in PerSecond: the
// agent's network ReceiveBytesPerSecond / TransmitBytesPerSecond) are not
// percentages: their histogram has bins growing by 3 % from 1 up to ~7e12,
// and they are given in their own unit (B/s, kB/s, MB/s, GB/s).
class OverallSystemUsage : public SystemRule<OverallSystemUsage> {
 public:
  friend class SystemRule<OverallSystemUsage>;
  explicit OverallSystemUsage(RuleParameterReader& p) { CommonParameters(p); }
  std::string name() const override { return "OverallSystemUsage"; }

 protected:
  static constexpr int kBins = 1001;
  static constexpr double kRateGrowth = 1.03;
  struct Histogram {
    std::array<int64_t, kBins> bins{};
    int64_t n = 0;
    double max = -1e300;
    bool rate = false;  // A PerSecond dimension (see above), set by Find.
  };
  static size_t RateBin(double value) {
    if (!(value >= 1.0)) return 0;
    const double bin = 1.0 + std::floor(std::log(value) / std::log(kRateGrowth));
    return static_cast<size_t>(std::min(bin, static_cast<double>(kBins - 1)));
  }
  static size_t PercentBin(double value) {
    // std::lround(x) for x in [0, 1000], without the libm call: x - whole
    // is exact (Sterbenz), so this rounds half away from zero as lround.
    const double x = std::clamp(value, 0.0, 100.0) * 10;
    size_t bin = static_cast<size_t>(x);
    if (x - static_cast<double>(bin) >= 0.5) ++bin;
    return bin;
  }
  bool OnPoint(const SystemMetricPoint& pt) {
    Histogram& h = Find(pt);
    ++h.bins[h.rate ? RateBin(pt.value) : PercentBin(pt.value)];
    ++h.n;
    h.max = std::max(h.max, pt.value);
    return false;
  }
  RuleVerdict End() override { return NoIssues(Summary()); }
  int64_t Violations() const override { return 0; }
  std::string Progress() const override { return Summary(); }

 private:
  // The points of a node cycle through its dimensions, so the state
  // cache's last-key check rarely hits: the known dimensions of the last node are
  // kept by MetricDimension (checked against the dimension text).
  Histogram& Find(const SystemMetricPoint& pt) {
    const SeriesKey key(pt.node_id, pt.dimension);
    auto make = [&] {
      Histogram* made = &usage_[key];
      made->rate = absl::EndsWith(pt.dimension.view(), "PerSecond");
      return made;
    };
    if (pt.dim == MetricDimension::kOther) return *state_cache_.Get(key, make);
    if (pt.node_id != cached_node_) {
      cached_node_ = pt.node_id;
      by_dim_.fill(ByDim{});
    }
    ByDim& slot = by_dim_[static_cast<size_t>(pt.dim)];
    if (slot.histogram == nullptr || slot.dimension != pt.dimension) {
      slot.dimension = pt.dimension;
      slot.histogram = state_cache_.Get(key, make);
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
      // (A structured binding cannot be captured before C++20.)
      const bool is_rate = h.rate;
      const auto format = [is_rate](double value) {
        return is_rate ? FormatRate(value) : FormatPercent(value);
      };
      absl::StrAppend(&details, " ", key.second.view(), " p50 ", format(Quantile(h, 50)),
                      " p95 ", format(Quantile(h, 95)), " p99 ", format(Quantile(h, 99)),
                      " max ", format(h.max));
    }
    return details;
  }
  static double Quantile(const Histogram& h, double q) {
    int64_t rank = static_cast<int64_t>(std::ceil(q / 100.0 * static_cast<double>(h.n)));
    rank = std::max<int64_t>(rank, 1);
    int64_t acc = 0;
    for (int i = 0; i < kBins; ++i) {
      acc += h.bins[i];
      if (acc < rank) continue;
      // A rate bin's lower bound (within 3 % of the values in it).
      if (h.rate) return i == 0 ? 0.0 : std::pow(kRateGrowth, i - 1);
      return i / 10.0;
    }
    return h.rate ? h.max : 100;
  }
  // "512 B/s", "1.5 kB/s", "12.3 MB/s", "1.2 GB/s" (decimal units).
  static std::string FormatRate(double bytes_per_second) {
    static constexpr const char* kUnits[] = {"B/s", "kB/s", "MB/s", "GB/s", "TB/s"};
    double value = std::max(0.0, bytes_per_second);
    size_t unit = 0;
    while (value >= 1000.0 && unit + 1 < std::size(kUnits)) value /= 1000.0, ++unit;
    return unit == 0 ? absl::StrFormat("%.0f %s", value, kUnits[unit])
                     : absl::StrFormat("%.1f %s", value, kUnits[unit]);
  }
  std::map<SeriesKey, Histogram> usage_;
  SeriesStateCache<SeriesKey, Histogram> state_cache_;
  struct ByDim {
    MetricString dimension;
    Histogram* histogram = nullptr;
  };
  MetricString cached_node_;
  std::array<ByDim, static_cast<size_t>(MetricDimension::kOther)> by_dim_{};
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
      : cpu_threshold_(PercentParameter(p, "cpu_threshold_p95", 70)),
        gpu_threshold_(PercentParameter(p, "gpu_threshold_p95", 70)),
        memory_threshold_(PercentParameter(p, "gpu_memory_threshold_p95", 70)),
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
    Node& node = state_cache_.FindOrAdd(nodes_, pt.node_id);
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
        absl::StrAppend(&part, "; last window CPU p95 ", FormatPercent(node.last_cpu_p95));
        for (const auto& [gpu, g] : node.gpus) {
          if (g.last_util_p95 < 0) continue;
          absl::StrAppend(&part, ", ", gpu.view(), " p95 ", FormatPercent(g.last_util_p95),
                          " memory p95 ", FormatPercent(g.last_memory_p95));
        }
      }
      AppendPart(&out, part);
    }
    absl::StrAppend(&out, so_far ? " so far" : "", "; thresholds: CPU p95 ",
                    FormatPercent(cpu_threshold_), ", GPU p95 ", FormatPercent(gpu_threshold_),
                    ", GPU memory p95 ", FormatPercent(memory_threshold_),
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
    const double cpu_p95 = LinearInterpolatedPercentile(&node.cpu, 95);
    node.last_cpu_p95 = cpu_p95;
    ++node.windows;
    std::string found;
    for (auto& [gpu, g] : node.gpus) {
      if (g.utilization.size() * 2 < n || g.memory.size() * 2 < n) {
        g.utilization.clear(), g.memory.clear();
        continue;
      }
      g.last_util_p95 = LinearInterpolatedPercentile(&g.utilization, 95);
      g.last_memory_p95 = LinearInterpolatedPercentile(&g.memory, 95);
      g.utilization.clear(), g.memory.clear();
      if (cpu_p95 < cpu_threshold_ && g.last_util_p95 < gpu_threshold_ &&
          g.last_memory_p95 < memory_threshold_) {
        ++violations_;
        absl::StrAppend(&found, found.empty() ? "" : ", ", gpu.view(), " utilization p95 ",
                        FormatPercent(g.last_util_p95), " and memory p95 ",
                        FormatPercent(g.last_memory_p95));
      }
    }
    node.cpu.clear();
    if (found.empty()) return RuleVerdict::Continue();
    return Issues(absl::StrCat(
        "CPU, GPU and GPU memory all lightly used on ", id,
        " (batch size may be too small): ", found, " below gpu_threshold_p95 ",
        FormatPercent(gpu_threshold_), " and gpu_memory_threshold_p95 ",
        FormatPercent(memory_threshold_), ", CPU utilization (mean over cores) p95 ",
        FormatPercent(cpu_p95), " below cpu_threshold_p95 ", FormatPercent(cpu_threshold_),
        "; over ", n, " samples from ", FormatTimestamp(node.first_ts), " to ",
        FormatTimestamp(node.last_ts), " after patience ", patience_));
  }

  double cpu_threshold_, gpu_threshold_, memory_threshold_;
  int64_t patience_, window_;
  std::map<MetricString, Node> nodes_;
  SeriesStateCache<MetricString, Node> state_cache_;
  int64_t violations_ = 0;
};

}  // namespace

void AddSystemUsageRules(ProfilerRuleFactories* factories) {
  (*factories)["OverallSystemUsage"] = MakeProfilerRule<OverallSystemUsage>;
  (*factories)["BatchSize"] = MakeProfilerRule<BatchSize>;
}

}  // namespace debugplane::rules_engine::profiler_rules_internal
