// The built-in profiler rules, with the documented parameters and defaults
// (shared/reference/sagemaker-docs/debugger-built-in-rules.md). Over system
// metrics (SystemMetricsReader's points): LowGPUUtilization, CPUBottleneck,
// IOBottleneck, GPUMemoryIncrease, OverallSystemUsage, LoadBalancing,
// BatchSize. Over framework timelines (FrameworkEvent): StepOutlier,
// MaxInitializationTime, OverallFrameworkMetrics. ProfilerReport, which runs
// them all, is built by profiler_report_rules.h.
//
//   auto rule = CreateProfilerRule("CPUBottleneck", {{"threshold", "50"}});
//   for (;;) { verdict = (*rule)->OnMetrics(reader.ReadNew()); ... }
//   verdict = (*rule)->OnEnd();
//
// Where the docs are vague, the decisions are written next to each rule in
// the rules_*.cc files (profiler_rules.cc lists them). Common to all:
// - Verdicts depend only on the points and their order, never on how they
//   are split into OnMetrics calls (checks happen at data-defined points:
//   complete windows, every kCheckEvery evaluated samples, and OnEnd).
// - IssuesFound is terminal and sticky: later calls return it again.
// - OnEnd: Error if no point at all was seen; NoIssuesFound (saying why)
//   when the needed metric was absent or too short to evaluate.
// - scan_interval_us is accepted (>= 1) and unused: evaluation is driven by
//   the data, not by a scan period.

#ifndef DEBUGPLANE_RULES_ENGINE_PROFILER_RULES_PROFILER_RULES_H_
#define DEBUGPLANE_RULES_ENGINE_PROFILER_RULES_PROFILER_RULES_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "rules_engine/profiler/framework_event.h"
#include "rules_engine/profiler/system_metrics_reader.h"
#include "rules_engine/rule/rule.h"

namespace debugplane::rules_engine {

// What a profiler rule has concluded so far, for the profiling report.
struct ProfilerRuleFinding {
  std::string rule;  // "CPUBottleneck", ...
  // Every parameter the rule uses, as it uses it (defaults filled in), e.g.
  // {"threshold": "50", "patience": "1000", ...}.
  std::map<std::string, std::string> parameters;
  // kContinue while undecided; otherwise the verdict reached (terminal).
  RuleVerdict::Kind status = RuleVerdict::Kind::kContinue;
  // The verdict's details, or what the rule has seen so far (e.g. "12000
  // CPU points, 3 of 120 windows above threshold").
  std::string details;
  // Data points (system metrics or framework events) the rule evaluated.
  int64_t datapoints = 0;
  // Times the rule's condition held so far (bottleneck windows, outlier
  // steps, ...); what the report's "triggered" column shows.
  int64_t violations = 0;
  // Global step numbers a framework rule singles out (StepOutlier's
  // outliers), for the report's step histogram.
  std::vector<int64_t> flagged_steps;
};

// A profiler rule over system metrics and/or framework events. Not
// thread-safe; deterministic: the same data in the same order gives the same
// verdicts, however it is split into calls (checks happen at data-defined
// points), so a restart can replay the data from the start.
class ProfilerRule {
 public:
  // CPUBottleneck, IOBottleneck and LoadBalancing check their ratio every
  // this many evaluated samples (and at OnEnd).
  static constexpr int kCheckEvery = 100;

  virtual ~ProfilerRule() = default;
  virtual std::string name() const = 0;
  // Which inputs the rule reads; the scheduler only reads (and feeds) those
  // some rule of the job wants.
  virtual bool WantsSystemMetrics() const { return true; }
  virtual bool WantsFrameworkEvents() const { return false; }
  // Evaluates points in file order (as SystemMetricsReader::ReadNew gives
  // them). kContinue or kIssuesFound.
  virtual RuleVerdict OnMetrics(absl::Span<const SystemMetricPoint> points) = 0;
  // Evaluates framework events in file order (as the framework timeline
  // reader gives them). kContinue or kIssuesFound.
  virtual RuleVerdict OnFrameworkEvents(absl::Span<const FrameworkEvent> events) {
    (void)events;
    return RuleVerdict::Continue();
  }
  // Wall-clock conditions (MaxInitializationTime: no step yet after
  // `threshold` minutes); called at least once per scheduler poll interval.
  // kContinue or kIssuesFound.
  virtual RuleVerdict OnTick(absl::Time now) {
    (void)now;
    return RuleVerdict::Continue();
  }
  // Training ended and every point was given: the final verdict.
  virtual RuleVerdict OnEnd() = 0;
  // The rule's state for the report; cheap enough to call after every batch.
  virtual ProfilerRuleFinding Finding() const = 0;
};

// Creates profiler rule `name` with `parameters` (strings; documented
// defaults for the missing ones; reserved keys such as rule_to_invoke and
// base_trial are ignored). INVALID_ARGUMENT naming the parameter for a bad
// value or an unknown parameter, NOT_FOUND for an unknown rule.
absl::StatusOr<std::unique_ptr<ProfilerRule>> CreateProfilerRule(const std::string& name,
                                                                 const RuleParameters& parameters);

// The names CreateProfilerRule knows, sorted.
std::vector<std::string> ProfilerRuleNames();

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_PROFILER_RULES_PROFILER_RULES_H_
