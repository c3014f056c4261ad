// Gauges of what the job manager holds, set at scrape time from its
// snapshot (core::TrainingJobManager::CountStatuses): how many jobs and rule
// evaluations are in each status, and how many watch streams are open.
//
// Labels are statuses and stream kinds only (fixed sets): never a job name,
// so a server with a million jobs still exposes a handful of series.

#ifndef DEBUGPLANE_METRICS_JOB_METRICS_H_
#define DEBUGPLANE_METRICS_JOB_METRICS_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace debugplane::metrics {

class JobMetrics {
 public:
  // Registers debugplane_jobs{status}, debugplane_rule_evaluations{status}
  // and debugplane_watch_streams_open{kind} in `registry`, which must
  // outlive this object. Throws (prometheus-cpp) if they are registered
  // there already.
  explicit JobMetrics(prometheus::Registry& registry);

  // Jobs whose TrainingJobStatus is `status` (e.g. "InProgress").
  void SetJobs(absl::string_view status, int64_t count);
  // Rule evaluations (debugging and profiler rules) whose
  // RuleEvaluationStatus is `status` (e.g. "IssuesFound").
  void SetRuleEvaluations(absl::string_view status, int64_t count);
  // Watch streams open, by `kind`: "client" (WatchTrainingJob) or "agent"
  // (the agents' ConnectAgent streams).
  void SetWatchStreams(absl::string_view kind, int64_t count);

 private:
  prometheus::Family<prometheus::Gauge>& jobs_;
  prometheus::Family<prometheus::Gauge>& rule_evaluations_;
  prometheus::Family<prometheus::Gauge>& watch_streams_;
};

}  // namespace debugplane::metrics

#endif  // DEBUGPLANE_METRICS_JOB_METRICS_H_
