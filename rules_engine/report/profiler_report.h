// The ProfilerReport rule's output: a self-contained HTML page per training
// job (inline CSS and server-side SVG charts, no script, no external resource
// of any kind, so it can be opened offline or attached anywhere) and a JSON
// summary beside it.
//
//   ProfilerReportData data;
//   data.AddMetrics(system_reader.ReadNew());          // as data arrives
//   data.AddFrameworkEvents(framework_reader.ReadNew());
//   std::string html = RenderProfilerReportHtml(data, findings, context);
//   std::string json = RenderProfilerReportJson(data, findings, context);
//
// The data is summarized in bounded memory however long the job runs, so the
// page stays small (well under 2 MB) for a month-long job with many devices.
//
// The page, top to bottom: a header (job, training status, generated time,
// "live" or "final" badge, the readers' summary), overview cards, the rules'
// findings table (IssuesFound rows first and highlighted), then the charts,
// each an <svg> with a stable id (or, without data, a
// <div class="empty-state" id="<id>-empty"> saying why):
//   chart-cpu          CPU utilization over time, mean over the cores per node
//   chart-gpu          GPU utilization over time, per GPU (per node mean above 8 GPUs)
//   chart-heatmap      utilization heatmap: CPU cores and GPUs x time buckets
//   chart-gpu-memory   GPU memory utilization over time, per GPU
//   chart-host         host memory used and I/O wait over time, per node
//   chart-step-histogram  step duration histogram, outlier steps marked
//   chart-step-timeline   step duration by step number (bucket mean and max)
// Every chart svg has class "chart"; rule thresholds that apply to a chart
// (e.g. CPUBottleneck's cpu_threshold on chart-cpu) are drawn as dashed lines.
//
// JSON summary keys (stable; absent values are null):
//   job, rule_configuration_name, training_job_status, final (bool),
//   generated_at (RFC 3339, UTC), data_summary,
//   findings: [{rule, status ("InProgress" | "IssuesFound" | "NoIssuesFound"
//              | "Error"), details, parameters {name: value}, datapoints,
//              violations, flagged_steps [int]}]  (in the given order)
//   system: {metric_points, start, end (RFC 3339 of the first/last point
//            time), bucket_seconds, nodes [string],
//            devices: [{node, device, dimension, count, mean, p50, p95, max,
//                       min}]}  sorted by dimension, node, device
//   steps: {count, exact (bool: every duration kept), mean_ms, p50_ms,
//           p95_ms, min_ms, max_ms, modes {"TRAIN": count, ...},
//           outlier_steps [int], slowest: [{step, mode, node, duration_ms}]}
// Quantiles are nearest-rank: the ceil(q * n)-th smallest value (1-based).
// Device values are quantized to kValueResolution before ranking (the
// reported quantile is the quantized value, clamped to [min, max]); step
// durations are exact while at most kMaxExactSteps were seen, then come from
// a log-spaced histogram (relative error below 1.2%). mean, min and max are
// always exact. outlier_steps are the flagged_steps of the StepOutlier
// finding(s), so the report and the rule agree (other rules' flagged_steps,
// e.g. MaxInitializationTime's first step, are not outliers).

#ifndef DEBUGPLANE_RULES_ENGINE_REPORT_PROFILER_REPORT_H_
#define DEBUGPLANE_RULES_ENGINE_REPORT_PROFILER_REPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/time/time.h"
#include "absl/types/span.h"
#include "rules_engine/profiler/framework_event.h"
#include "rules_engine/profiler/system_metrics_reader.h"
#include "rules_engine/profiler_rules/profiler_rules.h"
#include "rules_engine/report/value_aggregate.h"

namespace debugplane::rules_engine {

namespace profiler_report_internal {

// Aggregates (sum, count, min, max) of values over a fixed number of equal
// buckets along an axis (time in seconds, or step numbers). The bucket width
// is base_width * 2^k and bucket edges are multiples of the width, so when a
// value falls outside the covered range the width doubles and pairs of
// buckets merge exactly (no resampling error) until everything fits.
class Buckets {
 public:
  using Cell = ValueAggregate<double, int64_t>;

  Buckets(int num_buckets, double base_width);
  void Add(double x, double value);
  bool empty() const { return count_ == 0; }
  // Bucket i covers [origin() + i * width(), origin() + (i + 1) * width()).
  double origin() const { return origin_; }
  double width() const { return width_; }
  const std::vector<Cell>& cells() const { return cells_; }
  // Where the covered data starts and ends (exact, not bucket edges).
  double min_x() const { return min_x_; }
  double max_x() const { return max_x_; }

  // Makes the grid at least as wide as `width` with its origin aligned to
  // the width (so several series share the same buckets).
  void ExpandTo(double width, double lo, double hi);

 private:
  void Regrid(double lo, double hi);

  int num_buckets_;
  double width_;
  double origin_ = 0;
  std::vector<Cell> cells_;
  int64_t count_ = 0;
  double min_x_ = 0;
  double max_x_ = 0;
};

// Quantiles over values in [0, 100] (percentages) in constant memory.
class PercentHistogram {
 public:
  void Add(double value);
  int64_t count() const { return values_.count; }
  double mean() const { return values_.count ? values_.sum / values_.count : 0; }
  double min() const { return values_.min; }
  double max() const { return values_.max; }
  // Nearest-rank quantile of the quantized values (see the file comment).
  double Quantile(double q) const;

 private:
  std::vector<uint32_t> bins_;  // Allocated on the first Add.
  ValueAggregate<double, int64_t> values_;
};

}  // namespace profiler_report_internal

// Accumulates what the report draws, in bounded memory however long the job
// runs: kTimeBuckets time buckets per series (merging as time grows), one
// series per (dimension, node, device) up to kMaxDeviceSeries and one per
// (dimension, node) up to kMaxNodes, step durations exact up to
// kMaxExactSteps then as a histogram. Points of other dimensions (kOther) are
// counted but not drawn. Not thread-safe.
class ProfilerReportData {
 public:
  static constexpr int kTimeBuckets = 240;
  static constexpr int kStepBuckets = 400;
  static constexpr int kMaxDeviceSeries = 512;
  static constexpr int kMaxNodes = 256;
  static constexpr int64_t kMaxExactSteps = 100000;
  static constexpr double kValueResolution = 0.1;  // Percent, for quantiles.
  static constexpr int kSlowestSteps = 10;

  ProfilerReportData();

  void AddMetrics(absl::Span<const SystemMetricPoint> points);
  // Only step events (StepEventMode(name) non-empty) are summarized: their
  // duration is the step duration. Others are ignored.
  void AddFrameworkEvents(absl::Span<const FrameworkEvent> events);
  // No metric point and no step event yet.
  bool empty() const;
  int64_t metric_points() const;
  int64_t step_events() const;

  // What the renderers read; also useful to tests.
  struct SeriesKey {
    MetricDimension dim;
    std::string node;
    std::string device;  // Empty for a per-node series.
    bool operator<(const SeriesKey& o) const {
      return std::tie(dim, node, device) < std::tie(o.dim, o.node, o.device);
    }
  };
  struct Series {
    profiler_report_internal::Buckets buckets{kTimeBuckets, 1.0};
    profiler_report_internal::PercentHistogram values;
  };
  struct StepRecord {
    int64_t step;
    int64_t duration_us;
    std::string mode;
    std::string node;
  };
  // Per (dimension, node, device); devices beyond kMaxDeviceSeries only
  // count in the per-node series.
  const std::map<SeriesKey, Series>& device_series() const { return devices_; }
  // Per (dimension, node): the mean over the node's devices per bucket.
  const std::map<SeriesKey, Series>& node_series() const { return nodes_; }
  int64_t dropped_device_points() const { return dropped_device_points_; }
  // Earliest and latest metric timestamp (seconds); 0 when none.
  double first_timestamp() const { return first_ts_; }
  double last_timestamp() const { return last_ts_; }

  // Step durations (microseconds): every one while step_events() <=
  // kMaxExactSteps, else empty (statistics from the histogram).
  const std::vector<int64_t>& step_durations_us() const { return step_durations_; }
  bool steps_exact() const { return steps_exact_; }
  double step_mean_us() const;
  int64_t step_min_us() const { return step_min_; }
  int64_t step_max_us() const { return step_max_; }
  // Nearest-rank quantile (exact, or from the histogram; see file comment).
  double StepQuantileUs(double q) const;
  // Step counts per log-spaced bin (kLogBinsPerDecade per decade from 1 us),
  // always maintained: what the histogram chart uses past kMaxExactSteps.
  static constexpr int kLogBinsPerDecade = 100;
  const std::vector<int64_t>& step_log_histogram() const { return step_log_bins_; }
  static double LogBinLowerUs(int bin);
  // Per step number (or arrival order when a step has none): duration
  // statistics, in microseconds.
  const profiler_report_internal::Buckets& step_buckets() const { return step_buckets_; }
  const std::map<std::string, int64_t>& step_modes() const { return step_modes_; }
  // The kSlowestSteps longest step events, longest first.
  const std::vector<StepRecord>& slowest_steps() const { return slowest_; }
  // The longest duration of each of `steps` (those a finding flags), from
  // the exact records, or past kMaxExactSteps from slowest_steps() only;
  // steps not found are omitted.
  std::map<int64_t, int64_t> DurationsOfSteps(const std::vector<int64_t>& steps) const;

 private:
  Series* FindSeries(std::map<SeriesKey, Series>& map, int cap, MetricDimension dim,
                     const std::string& node, const std::string& device);

  std::map<SeriesKey, Series> devices_;
  std::map<SeriesKey, Series> nodes_;
  int64_t metric_points_ = 0;
  int64_t dropped_device_points_ = 0;
  double first_ts_ = 0;
  double last_ts_ = 0;

  int64_t step_events_ = 0;
  bool steps_exact_ = true;
  std::vector<int64_t> step_durations_;
  std::vector<int64_t> step_numbers_;  // Parallel to step_durations_.
  std::vector<int64_t> step_log_bins_;
  double step_sum_us_ = 0;
  int64_t step_min_ = 0;
  int64_t step_max_ = 0;
  profiler_report_internal::Buckets step_buckets_{kStepBuckets, 1.0};
  std::map<std::string, int64_t> step_modes_;
  // Past kMaxExactSteps, DurationsOfSteps can only answer from these.
  std::vector<StepRecord> slowest_;
};

struct ProfilerReportContext {
  std::string training_job_name;
  std::string rule_configuration_name;  // e.g. "ProfilerReport"
  std::string training_job_status;      // "InProgress", "Completed", ...
  absl::Time generated_at;
  bool final = false;        // Training ended: the last regeneration.
  std::string data_summary;  // e.g. the readers' one-line summaries (problems too)
};

// "InProgress" (kContinue), "IssuesFound", "NoIssuesFound", "Error".
std::string ProfilerRuleStatusName(RuleVerdict::Kind kind);

// A complete HTML page (see the file comment): inline CSS and inline SVG, no
// script and no external resource of any kind. Every string from the data
// (job names, rule names, parameters, details, device names) is escaped.
std::string RenderProfilerReportHtml(const ProfilerReportData& data,
                                     const std::vector<ProfilerRuleFinding>& findings,
                                     const ProfilerReportContext& context);

// The JSON summary (keys in the file comment), pretty-printed; invalid UTF-8
// in the data is replaced, never thrown on.
std::string RenderProfilerReportJson(const ProfilerReportData& data,
                                     const std::vector<ProfilerRuleFinding>& findings,
                                     const ProfilerReportContext& context);

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_REPORT_PROFILER_REPORT_H_
