// What the system-metric rule families (rules_gpu.cc, rules_bottleneck.cc,
// rules_system_usage.cc) share: the series key, the per-series state
// lookup, the per-point loop (SystemRule), and each rule's factory for
// CreateProfilerRule (profiler_rules.cc). Internal to profiler_rules/.

#ifndef DEBUGPLANE_RULES_ENGINE_PROFILER_RULES_SYSTEM_RULE_H_
#define DEBUGPLANE_RULES_ENGINE_PROFILER_RULES_SYSTEM_RULE_H_

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "rules_engine/profiler_rules/profiler_rule_base.h"
#include "rules_engine/profiler_rules/profiler_rules.h"

namespace debugplane::rules_engine::profiler_rules_internal {

// Node, device: a series (MetricStrings order by text, so maps keyed by them
// iterate, and details list series, as with the std::string keys before).
using SeriesKey = std::pair<MetricString, MetricString>;

// Finds a rule's per-series (or per-node) state without a map search per
// point: the last key is remembered (points of one series often come in a
// row), then a hash of the interned pointers. `make` returns the state's
// stable address (an element of the rule's ordered map) on first sight.
template <typename Key, typename T>
class SeriesStateCache {
 public:
  template <typename Make>
  T* Get(const Key& key, Make make) {
    if (last_ != nullptr && key == last_key_) return last_;
    auto [it, inserted] = states_.try_emplace(key, nullptr);
    if (inserted) it->second = make();
    last_key_ = key;
    last_ = it->second;
    return last_;
  }
  // Get() of the state `states` holds for `key` (added on first sight).
  T& FindOrAdd(std::map<Key, T>& states, const Key& key) {
    return *Get(key, [&] { return &states[key]; });
  }

 private:
  absl::flat_hash_map<Key, T*> states_;
  Key last_key_{};
  T* last_ = nullptr;
};

// The system-metric rules' per-point loop, with Derived::OnPoint called
// directly (not virtual: inlined, and the dimension filter most rules start
// with costs a compare). OnPoint(point) returns whether the rule fired, its
// verdict given to Fire().
template <typename Derived>
class SystemRule : public ProfilerRuleBase {
 public:
  SystemRule() : ProfilerRuleBase(Input::kSystemMetrics) {}

  RuleVerdict OnMetrics(absl::Span<const SystemMetricPoint> points) final {
    Derived& self = static_cast<Derived&>(*this);
    return FeedPoints(points,
                      [&self](const SystemMetricPoint& point) { return self.OnPoint(point); });
  }
};

// The first kIssuesFound verdict `judge(entry)` gives over `entries` (in
// their order), else Continue: how End() judges what is left per series or
// node. `judge` may change the entry (it closes a window).
template <typename Entries, typename Judge>
RuleVerdict FirstIssue(Entries& entries, Judge judge) {
  for (auto& entry : entries) {
    RuleVerdict verdict = judge(entry);
    if (verdict.kind == RuleVerdict::Kind::kIssuesFound) return verdict;
  }
  return RuleVerdict::Continue();
}

// The system-metric rules by their name (ProfilerRule::name()), as
// CreateProfilerRule makes them; each family adds its own.
using ProfilerRuleFactory = absl::StatusOr<std::unique_ptr<ProfilerRule>> (*)(
    const std::string& name, const RuleParameters& parameters);
using ProfilerRuleFactories = std::map<std::string, ProfilerRuleFactory>;
// LowGPUUtilization, GPUMemoryIncrease, LoadBalancing (rules_gpu.cc).
void AddGpuRules(ProfilerRuleFactories* factories);
// CPUBottleneck, IOBottleneck (rules_bottleneck.cc).
void AddBottleneckRules(ProfilerRuleFactories* factories);
// OverallSystemUsage, BatchSize (rules_system_usage.cc).
void AddSystemUsageRules(ProfilerRuleFactories* factories);

}  // namespace debugplane::rules_engine::profiler_rules_internal

#endif  // DEBUGPLANE_RULES_ENGINE_PROFILER_RULES_SYSTEM_RULE_H_
