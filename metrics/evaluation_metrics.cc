#include "metrics/evaluation_metrics.h"

#include <algorithm>
#include <string>

#include "metrics/family.h"

namespace debugplane::metrics {
namespace {

// From inotify's milliseconds to a polled object store's minutes.
const prometheus::Histogram::BucketBoundaries kLatencyBuckets = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
// 0 is "caught up"; a replay from the start can be thousands of steps behind.
const prometheus::Histogram::BucketBoundaries kLagBuckets = {0,  1,   2,   5,    10,   20,
                                                             50, 100, 500, 1000, 10000};

}  // namespace

EvaluationMetrics::EvaluationMetrics(prometheus::Registry& registry)
    : detection_latency_(
          HistogramFamily(
              registry, "debugplane_detection_latency_seconds",
              "Seconds from a step's arrival (its files' modification time, or when the "
              "reader first saw it) to a debugging rule's IssuesFound for it being committed")
              .Add({}, kLatencyBuckets)),
      evaluation_lag_(
          HistogramFamily(registry, "debugplane_evaluation_lag_steps",
                          "After each evaluation turn of a job: the newest step seen in its "
                          "trial minus the last step its rules evaluated")
              .Add({}, kLagBuckets)),
      bytes_read_(
          CounterFamily(registry, "debugplane_read_bytes_total",
                        "Bytes rule evaluation fetched from training output, by source "
                        "(tensors: smdebug trials; profiler: system and framework metrics)")),
      tensor_bytes_(bytes_read_.Add({{"source", "tensors"}})),
      profiler_bytes_(bytes_read_.Add({{"source", "profiler"}})),
      steps_read_(CounterFamily(registry, "debugplane_steps_read_total",
                                "Tensor steps read from trials and evaluated by debugging rules")
                      .Add({})) {}

void EvaluationMetrics::ObserveDetectionLatency(absl::Duration latency) {
  detection_latency_.Observe(std::max(0.0, absl::ToDoubleSeconds(latency)));
}

void EvaluationMetrics::ObserveEvaluationLag(int64_t steps) {
  evaluation_lag_.Observe(static_cast<double>(std::max<int64_t>(0, steps)));
}

void EvaluationMetrics::AddBytesRead(ReadSource source, int64_t bytes) {
  if (bytes <= 0) return;
  prometheus::Counter& counter = source == ReadSource::kProfiler ? profiler_bytes_ : tensor_bytes_;
  counter.Increment(static_cast<double>(bytes));
}

void EvaluationMetrics::AddStepsRead(int64_t steps) {
  if (steps > 0) steps_read_.Increment(static_cast<double>(steps));
}

}  // namespace debugplane::metrics
