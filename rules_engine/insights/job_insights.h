// What the dashboard shows of one training job's profiler output, kept up to
// date incrementally: feed it the readers' new points and events
// (rules_engine/profiler/) and query reduced series at any range and width.
//
//   JobInsights data;
//   data.AddMetrics(system_reader.ReadNew());
//   data.AddFrameworkEvents(framework_reader.ReadNew());
//   SystemSeries s = data.QuerySystem({.width = 800});
//
// Kept per job:
// - system metrics: one SamplePyramid (bucket_pyramid.h) per (node, metric,
//   device) and per (node, metric) "total" (every device's samples, so its
//   mean is the node's mean over devices and min/max the extremes over
//   devices); per (node, metric) a percent histogram for the utilization
//   summary (min, max, p50, p90, p99; nearest-rank over values quantized to
//   0.1 %, as the profiler report's);
// - framework events: busy time per phase (step, forward, backward,
//   dataloader, other) in BusyPyramids, the last kMaxSteps steps, the
//   operations by total time (up to kMaxOperations names), and the times the
//   training summary splits into initialization / training loop /
//   finalization.
// Memory: at most about 1 MiB per series for a day of data (see
// bucket_pyramid.h), plus kMaxSteps * 64 bytes and the operation names.
//
// Not thread-safe: the owner (InsightsStore) locks.

#ifndef DEBUGPLANE_RULES_ENGINE_INSIGHTS_JOB_INSIGHTS_H_
#define DEBUGPLANE_RULES_ENGINE_INSIGHTS_JOB_INSIGHTS_H_

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "rules_engine/insights/bucket_pyramid.h"
#include "rules_engine/profiler/framework_event.h"
#include "rules_engine/profiler/system_metrics_reader.h"
#include "rules_engine/report/profiler_report.h"

namespace debugplane::rules_engine::insights {

// The dashboard's metric names, in the order series are listed.
enum class Metric { kCpu, kGpu, kGpuMemory, kCpuMemory, kIoWait, kNetworkRx, kNetworkTx };
inline constexpr int kMetricCount = 7;
// "cpu", "gpu", "gpu_memory", "cpu_memory", "io_wait", "network_rx", "network_tx".
absl::string_view MetricName(Metric metric);
std::optional<Metric> ParseMetric(absl::string_view name);
// The metric of an smdebug dimension ("CPUUtilization", ...; network
// dimensions, which smdebug itself does not write, are those naming Network
// or ending in BytesPerSecond, with Rx/Receive or Tx/Transmit: the agent's
// ReceiveBytesPerSecond and TransmitBytesPerSecond); nullopt for others.
std::optional<Metric> MetricOfDimension(absl::string_view dimension);
// Whether a metric's samples are per device (cpu0, gpu3) or per node only.
bool IsPerDevice(Metric metric);
bool IsPercent(Metric metric);

inline constexpr absl::string_view kTotalDevice = "total";

// Framework phases, in the order the reply lists them.
enum class Phase { kStep, kForward, kBackward, kDataloader, kOther };
inline constexpr int kPhaseCount = 5;
absl::string_view PhaseName(Phase phase);  // "step", "forward", ...

// The latest time (epoch seconds, the year 2286) a query or a sample may
// have: bucket indices of times up to it fit int64_t with room to spare.
// Samples outside [0, kLatestTime] are left out (the store drops the
// implausible ones before: rules_engine/profiler/plausible_times.h).
inline constexpr double kLatestTime = 1e10;
// The most buckets a query answers: a width past it is taken as this (the
// replies' buffers are sized by the width, never by a range).
inline constexpr int kMaxBuckets = 4000;
// The most cells (series x buckets) a system query answers: past it the
// width is lowered, so that a job with thousands of series (kMaxSeries) asked
// at full width is not a reply of hundreds of MB (1M cells: about 25 MB of
// JSON).
inline constexpr int64_t kMaxCells = int64_t{1} << 20;

// A query's range. Answered (QuerySystem, QueryFramework): a side not given
// (or not finite) is the data's; both are clamped to [0, kLatestTime]; an
// end before the start is the start; and a range that overlaps the data but
// reaches past it is narrowed to the data's span, so a client's
// "start=0&end=9999999999" gets the data at full width. A range beside the
// data is answered as asked (every bucket empty).
struct TimeRange {
  std::optional<double> start;  // Epoch seconds; absent: the data's.
  std::optional<double> end;
};

struct SystemQuery {
  TimeRange range;
  int width = 800;                   // Clamped to 1..kMaxBuckets (and kMaxCells).
  std::string node;                  // Empty: every node.
  std::optional<Metric> metric;      // Absent: every metric.
  std::vector<std::string> devices;  // Empty: every device (and "total").
};

struct SeriesKey {
  std::string node;
  Metric metric;
  std::string device;                        // "total" or the device ("cpu0", "gpu3").
  bool operator<(const SeriesKey& o) const;  // Node, metric, total first, devices naturally.
};

struct ReducedSeries {
  SeriesKey key;
  std::vector<SampleCell> cells;  // One per bucket; count 0: no sample.
};

struct SystemSeries {
  double start = 0;  // The range answered (see TimeRange).
  double end = 0;
  LevelChoice buckets;  // Bucket i starts at buckets.output_start(i).
  std::vector<std::string> nodes;
  std::vector<ReducedSeries> series;
};

struct StepRecord {
  int64_t step = -1;
  double start = 0;  // Epoch seconds.
  double end = 0;
  std::string node;
  std::string mode;  // "TRAIN", "EVAL", ...
};

struct FrameworkSeries {
  double start = 0;
  double end = 0;
  LevelChoice buckets;
  // Busy seconds per bucket, per phase (index: Phase).
  std::array<std::vector<double>, kPhaseCount> busy;
  std::vector<StepRecord> steps;  // The last kStepsShown in the range, oldest first.
};

struct TrainingPhase {
  std::string name;  // "initialization", "training_loop", "finalization".
  double start = 0;
  double end = 0;
};
struct TrainingSummary {
  std::optional<double> start;  // Earliest data time (metrics, timelines, events).
  std::optional<double> end;    // Latest data time, only once training ended.
  double latest = 0;            // Latest data time (set with start).
  std::vector<TrainingPhase> phases;
};

struct Utilization {
  std::string node;
  Metric metric;
  double min = 0, max = 0;
  std::optional<double> p99, p90, p50;  // Percent metrics only.
};

struct Operation {
  std::string name;
  Phase phase;
  double total_seconds = 0;
  int64_t count = 0;
  double share = 0;  // Of all operations' total time.
};

class JobInsights {
 public:
  static constexpr size_t kMaxSteps = 100000;
  static constexpr size_t kStepsShown = 200;
  static constexpr size_t kMaxOperations = 10000;
  static constexpr size_t kTopOperations = 20;
  static constexpr size_t kMaxSeries = 4096;

  explicit JobInsights(int level_capacity = kDefaultLevelCapacity);

  void AddMetrics(absl::Span<const SystemMetricPoint> points);
  void AddFrameworkEvents(absl::Span<const FrameworkEvent> events);
  // Forgets every framework event added (a timeline was replaced or cut:
  // the caller adds all of them again); the system metrics stay.
  void ResetFramework();

  // Series reduced to at most query.width buckets (see bucket_pyramid.h for
  // which level answers), over the range as TimeRange says, at a width
  // clamped to 1..kMaxBuckets: any range and width are safe.
  SystemSeries QuerySystem(const SystemQuery& query) const;
  FrameworkSeries QueryFramework(const TimeRange& range, int width) const;

  // `ended`: training ended, so the last data time is the end and the time
  // after the last step is finalization.
  TrainingSummary Summary(bool ended) const;
  std::vector<Utilization> UtilizationSummary() const;
  std::vector<Operation> TopOperations() const;

  int64_t metric_points() const { return metric_points_; }
  int64_t framework_events() const { return framework_events_; }
  size_t memory_bytes() const;

 private:
  struct Series {
    SamplePyramid pyramid;
    explicit Series(int capacity) : pyramid(capacity) {}
  };
  struct NodeMetric {
    profiler_report_internal::PercentHistogram percent;
    SampleCell extremes;  // Min and max of every sample.
  };
  // Where one (node, name, dimension) of the points goes.
  struct Route {
    Series* device = nullptr;  // Null for per-node metrics.
    Series* total = nullptr;
    NodeMetric* node = nullptr;
  };
  using PointKey = std::tuple<MetricString, MetricString, MetricString>;
  struct OperationTotal {
    Phase phase = Phase::kOther;
    int64_t total_us = 0;
    int64_t count = 0;
  };

  Route* RouteOf(const SystemMetricPoint& p);
  Series* SeriesOf(SeriesKey key);
  void AddStep(const FrameworkEvent& e, const std::string& mode);
  // The range answered (see TimeRange); `has_data`: data_start and
  // data_end are the data's span.
  static void ResolveRange(const TimeRange& range, bool has_data, double data_start,
                           double data_end, double* start, double* end);

  int level_capacity_;
  std::map<SeriesKey, std::unique_ptr<Series>> series_;
  std::map<std::pair<std::string, Metric>, NodeMetric> node_metrics_;
  absl::flat_hash_map<PointKey, Route> routes_;  // Route{} for points not shown.
  int64_t metric_points_ = 0;
  double metrics_first_ = 0, metrics_last_ = 0;

  std::array<std::unique_ptr<BusyPyramid>, kPhaseCount> busy_;
  std::deque<StepRecord> steps_;
  std::map<std::string, OperationTotal, std::less<>> operations_;
  int64_t framework_events_ = 0;
  double events_first_ = 0, events_last_end_ = 0;
  std::optional<double> timeline_start_;
  std::optional<double> first_step_start_, last_step_end_;
};

}  // namespace debugplane::rules_engine::insights

#endif  // DEBUGPLANE_RULES_ENGINE_INSIGHTS_JOB_INSIGHTS_H_
