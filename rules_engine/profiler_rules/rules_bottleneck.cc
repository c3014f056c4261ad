// The bottleneck rules over system metrics: CPUBottleneck and IOBottleneck
// (per node samples, the share of bottlenecked ones against a threshold).

#include <algorithm>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "rules_engine/profiler_rules/system_rule.h"
#include "rules_engine/rule/rule_parameters.h"

namespace debugplane::rules_engine::profiler_rules_internal {
namespace {

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

std::string BadShare(const char* what, int64_t bad, int64_t evaluated, double threshold) {
  return absl::StrCat(
      what, " in ", bad, " of ", evaluated, " samples (",
      FormatPercent(100.0 * static_cast<double>(bad) / static_cast<double>(evaluated)),
      ", above threshold ", FormatPercent(threshold), ")");
}

// What tells CPUBottleneck and IOBottleneck apart: the load that, high
// while every GPU is low, makes a sample bottlenecked, with its parameter,
// defaults and words.
struct BottleneckKind {
  const char* rule;
  const char* words;  // In the verdict: "CPU bottleneck on algo-1: ...".
  int64_t default_patience;
  double default_gpu_threshold;
  const char* load_parameter;
  double default_load_threshold;
  const char* needs;       // The metrics a sample needs to be evaluated.
  const char* load_short;  // In the progress: "CPU above 90.0% ...".
  const char* load_long;   // In the verdict.
  bool (*has_load)(const Sample& s);
  double (*load)(const Sample& s);
  bool cpu_mean_in_details;  // The verdict gives the CPU mean too.
};

constexpr BottleneckKind kCpuBottleneck = {
    "CPUBottleneck",
    "CPU bottleneck",
    100,
    10,
    "cpu_threshold",
    90,
    "CPUUtilization and GPUUtilization",
    "CPU",
    "CPU utilization (mean over cores)",
    [](const Sample& s) { return s.cpu_n > 0; },
    [](const Sample& s) { return s.cpu_sum / s.cpu_n; },
    true,
};

constexpr BottleneckKind kIoBottleneck = {
    "IOBottleneck",
    "I/O bottleneck",
    1000,
    70,
    "io_threshold",
    50,
    "I/OWaitPercentage and GPUUtilization",
    "I/O wait",
    "I/O wait",
    [](const Sample& s) { return s.has_io; },
    [](const Sample& s) { return s.io; },
    false,
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
  std::string name() const override { return kind_.rule; }
  bool OnPoint(const SystemMetricPoint& pt) {
    Node& node = state_cache_.FindOrAdd(nodes_, pt.node_id);
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
    RuleVerdict bottleneck = FirstIssue(nodes_, [this](auto& entry) {
      if (entry.second.evaluated == 0) return RuleVerdict::Continue();
      return Check(entry.first, entry.second);
    });
    if (bottleneck.kind == RuleVerdict::Kind::kIssuesFound) return bottleneck;
    std::string details;
    for (const auto& [id, node] : nodes_) {
      absl::StrAppend(&details, details.empty() ? "" : "; ", id.view(), ": ", node.samples,
                      " samples");
      if (node.evaluated == 0) {
        absl::StrAppend(&details, ", none evaluated (patience ", patience_, ", needs ", Needs(),
                        ")");
      } else {
        absl::StrAppend(&details, ", ", node.bottlenecks, " of ", node.evaluated, " evaluated (",
                        FormatPercent(100.0 * static_cast<double>(node.bottlenecks) /
                                      static_cast<double>(node.evaluated)),
                        ") bottlenecked, not above threshold ", FormatPercent(threshold_));
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
                                      FormatPercent(100.0 * static_cast<double>(node.bottlenecks) /
                                                    static_cast<double>(node.evaluated)),
                                      ") so far; threshold ", FormatPercent(threshold_)));
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
  BottleneckRule(RuleParameterReader& p, const BottleneckKind& kind)
      : kind_(kind),
        threshold_(PercentParameter(p, "threshold", 50)),
        patience_(p.Int("patience", kind.default_patience, 0)),
        gpu_threshold_(PercentParameter(p, "gpu_threshold", kind.default_gpu_threshold)),
        load_threshold_(PercentParameter(p, kind.load_parameter, kind.default_load_threshold)) {
    CommonParameters(p);
  }

 private:
  // Whether `s` can be evaluated, and whether it is a bottleneck.
  bool Usable(const Sample& s) const { return kind_.has_load(s) && s.gpu_n > 0; }
  bool Bottlenecked(const Sample& s) const {
    return kind_.load(s) > load_threshold_ && s.gpu_max < gpu_threshold_;
  }
  std::string Needs() const { return kind_.needs; }
  // The bottleneck condition in words ("CPU above 90.0% while GPU below
  // 10.0%").
  std::string Condition() const {
    return absl::StrCat(kind_.load_short, " above ", FormatPercent(load_threshold_),
                        " while GPU below ", FormatPercent(gpu_threshold_));
  }
  // The thresholds in the verdict ("CPU utilization (mean over cores) above
  // cpu_threshold 90.0% while GPU utilization was below gpu_threshold
  // 10.0%").
  std::string Thresholds() const {
    return absl::StrCat(
        kind_.load_long, " above ", kind_.load_parameter, " ", FormatPercent(load_threshold_),
        " while GPU utilization was below gpu_threshold ", FormatPercent(gpu_threshold_));
  }
  // The means in the bottlenecked samples (", mean CPU 95.0%, mean GPU 3.0%").
  std::string BottleneckMeans(const Node& n) const {
    const double bottlenecks = static_cast<double>(n.bottlenecks);
    return absl::StrCat(
        kind_.cpu_mean_in_details
            ? absl::StrCat(", mean CPU ", FormatPercent(n.bad_cpu_sum / bottlenecks))
            : "",
        ", mean GPU ", FormatPercent(n.bad_gpu_sum / bottlenecks));
  }
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
  // The verdict's details: what, where, how often, when, and the means in
  // the bottlenecked samples.
  std::string Describe(absl::string_view id, const Node& n) const {
    return absl::StrCat(kind_.words, " on ", id, ": ", Thresholds(),
                        BadShare("", n.bottlenecks, n.evaluated, threshold_), " after patience ",
                        patience_, "; bottlenecked from ", FormatTimestamp(n.first_bad_ts), " to ",
                        FormatTimestamp(n.last_bad_ts), BottleneckMeans(n),
                        " in those samples (evaluated ", FormatTimestamp(n.first_ts), " to ",
                        FormatTimestamp(n.last_ts), ")");
  }
  RuleVerdict Check(absl::string_view id, const Node& node) {
    double ratio =
        100.0 * static_cast<double>(node.bottlenecks) / static_cast<double>(node.evaluated);
    if (ratio > threshold_) return Issues(Describe(id, node));
    return RuleVerdict::Continue();
  }

  const BottleneckKind& kind_;
  const double threshold_;
  const int64_t patience_;
  const double gpu_threshold_, load_threshold_;
  std::map<MetricString, Node> nodes_;
  SeriesStateCache<MetricString, Node> state_cache_;
};

class CpuBottleneck : public BottleneckRule {
 public:
  explicit CpuBottleneck(RuleParameterReader& p) : BottleneckRule(p, kCpuBottleneck) {}
};

class IoBottleneck : public BottleneckRule {
 public:
  explicit IoBottleneck(RuleParameterReader& p) : BottleneckRule(p, kIoBottleneck) {}
};

}  // namespace

void AddBottleneckRules(ProfilerRuleFactories* factories) {
  (*factories)["CPUBottleneck"] = MakeProfilerRule<CpuBottleneck>;
  (*factories)["IOBottleneck"] = MakeProfilerRule<IoBottleneck>;
}

}  // namespace debugplane::rules_engine::profiler_rules_internal
