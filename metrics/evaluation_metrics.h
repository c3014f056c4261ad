// What rule evaluation does, recorded by the rules engine's workers
// (rules_engine/scheduling/job_evaluation.h): how long a finding takes from
// the data's arrival to its durable verdict, how far evaluation trails the
// newest step written, and how much it reads.

#ifndef DEBUGPLANE_METRICS_EVALUATION_METRICS_H_
#define DEBUGPLANE_METRICS_EVALUATION_METRICS_H_

#include <cstdint>

#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace debugplane::metrics {

// Where rule evaluation reads from.
enum class ReadSource {
  kTensors,   // smdebug trials (debugging rules).
  kProfiler,  // System metrics and framework timelines (profiler rules).
};

class EvaluationMetrics {
 public:
  // Registers debugplane_detection_latency_seconds,
  // debugplane_evaluation_lag_steps, debugplane_read_bytes_total{source} and
  // debugplane_steps_read_total in `registry`, which must outlive this
  // object. Throws (prometheus-cpp) if they are registered there already.
  explicit EvaluationMetrics(prometheus::Registry& registry);

  // A debugging rule found issues: `latency` from the step's arrival (its
  // index files' modification time, or when the reader first saw it) to the
  // IssuesFound status being committed. Negative latencies (clock skew
  // between the writer and this host) count as 0.
  void ObserveDetectionLatency(absl::Duration latency);
  // After a turn of a job's debugging rules: the newest step the trial
  // reader has seen minus the last step evaluated (0: caught up).
  void ObserveEvaluationLag(int64_t steps);
  // Bytes the readers fetched from the store (ignored unless positive).
  void AddBytesRead(ReadSource source, int64_t bytes);
  // Tensor steps read and handed to the rules.
  void AddStepsRead(int64_t steps);

 private:
  prometheus::Histogram& detection_latency_;
  prometheus::Histogram& evaluation_lag_;
  prometheus::Family<prometheus::Counter>& bytes_read_;
  prometheus::Counter& tensor_bytes_;
  prometheus::Counter& profiler_bytes_;
  prometheus::Counter& steps_read_;
};

}  // namespace debugplane::metrics

#endif  // DEBUGPLANE_METRICS_EVALUATION_METRICS_H_
