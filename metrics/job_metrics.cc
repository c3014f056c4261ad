#include "metrics/job_metrics.h"

#include <string>

namespace debugplane::metrics {

JobMetrics::JobMetrics(prometheus::Registry& registry)
    : jobs_(prometheus::BuildGauge()
                .Name("debugplane_jobs")
                .Help("Training jobs by TrainingJobStatus")
                .Register(registry)),
      rule_evaluations_(prometheus::BuildGauge()
                            .Name("debugplane_rule_evaluations")
                            .Help("Rule evaluations (debugging and profiler rules of every job) "
                                  "by RuleEvaluationStatus")
                            .Register(registry)),
      watch_streams_(prometheus::BuildGauge()
                         .Name("debugplane_watch_streams_open")
                         .Help("Watch streams open: kind client (WatchTrainingJob) or agent "
                               "(ConnectAgent)")
                         .Register(registry)) {}

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
