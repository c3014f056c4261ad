#include "metrics/job_metrics.h"

#include <string>

#include "metrics/family.h"

namespace debugplane::metrics {

JobMetrics::JobMetrics(prometheus::Registry& registry)
    : jobs_(GaugeFamily(registry, "debugplane_jobs", "Training jobs by TrainingJobStatus")),
      rule_evaluations_(GaugeFamily(registry, "debugplane_rule_evaluations",
                                    "Rule evaluations (debugging and profiler rules of every job) "
                                    "by RuleEvaluationStatus")),
      watch_streams_(GaugeFamily(registry, "debugplane_watch_streams_open",
                                 "Watch streams open: kind client (WatchTrainingJob) or agent "
                                 "(ConnectAgent)")) {}

void JobMetrics::SetJobs(absl::string_view status, int64_t count) {
  jobs_.Add({{"status", std::string(status)}}).Set(static_cast<double>(count));
}

void JobMetrics::SetRuleEvaluations(absl::string_view status, int64_t count) {
  rule_evaluations_.Add({{"status", std::string(status)}}).Set(static_cast<double>(count));
}

void JobMetrics::SetWatchStreams(absl::string_view kind, int64_t count) {
  watch_streams_.Add({{"kind", std::string(kind)}}).Set(static_cast<double>(count));
}

}  // namespace debugplane::metrics
