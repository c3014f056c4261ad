// The built-in profiler rules over system metrics (SystemMetricsReader's
// points): LowGPUUtilization, CPUBottleneck, IOBottleneck, GPUMemoryIncrease,
// OverallSystemUsage, LoadBalancing, with the documented parameters and
// defaults (shared/reference/sagemaker-docs/debugger-built-in-rules.md).
//
//   auto rule = CreateProfilerRule("CPUBottleneck", {{"threshold", "50"}});
//   for (;;) { verdict = (*rule)->OnMetrics(reader.ReadNew()); ... }
//   verdict = (*rule)->OnEnd();
//
// Where the docs are vague, the decisions are written next to each rule in
// profiler_rules.cc. Common to all:
// - Verdicts depend only on the points and their order, never on how they
//   are split into OnMetrics calls (checks happen at data-defined points:
//   complete windows, every kCheckEvery evaluated samples, and OnEnd).
// - IssuesFound is terminal and sticky: later calls return it again.
// - OnEnd: Error if no point at all was seen; NoIssuesFound (saying why)
//   when the needed metric was absent or too short to evaluate.
// - scan_interval_us is accepted (>= 1) and unused: evaluation is driven by
//   the data, not by a scan period.

#ifndef DEBUGPLANE_RULES_ENGINE_PROFILER_RULES_H_
#define DEBUGPLANE_RULES_ENGINE_PROFILER_RULES_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "rules_engine/rule.h"
#include "rules_engine/system_metrics_reader.h"

namespace debugplane::rules_engine {

// A profiler rule over system metrics. Not thread-safe; deterministic.
class ProfilerRule {
 public:
  // CPUBottleneck, IOBottleneck and LoadBalancing check their ratio every
  // this many evaluated samples (and at OnEnd).
  static constexpr int kCheckEvery = 100;

  virtual ~ProfilerRule() = default;
  virtual std::string name() const = 0;
  // Evaluates points in file order (as SystemMetricsReader::ReadNew gives
  // them). kContinue or kIssuesFound.
  virtual RuleVerdict OnMetrics(absl::Span<const SystemMetricPoint> points) = 0;
  // Training ended and every point was given: the final verdict.
  virtual RuleVerdict OnEnd() = 0;
};

// Creates profiler rule `name` with `parameters` (strings; documented
// defaults for the missing ones; reserved keys such as rule_to_invoke and
// base_trial are ignored). INVALID_ARGUMENT naming the parameter for a bad
// value or an unknown parameter, NOT_FOUND for an unknown rule.
absl::StatusOr<std::unique_ptr<ProfilerRule>> CreateProfilerRule(
    const std::string& name, const RuleParameters& parameters);

// The names CreateProfilerRule knows, sorted.
std::vector<std::string> ProfilerRuleNames();

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_PROFILER_RULES_H_
