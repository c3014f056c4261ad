// The scaffolding every built-in profiler rule shares, the system-metric
// rules (rules_*.cc, with system_rule.h) and the framework rules
// (framework_rules.cc) alike: the parameters as the rule resolved them, the sticky terminal
// verdict, the counts of the data fed, Finding(), and OnEnd()'s Error when
// none of the rule's input was read, and the texts of their details.
// Internal to profiler_rules/: the
// public interface is ProfilerRule (profiler_rules.h).
//
// A family derives from ProfilerRuleBase, naming the input its verdicts
// rest on, and implements its input hooks (OnMetrics, OnFrameworkEvents)
// with FeedPoints/FeedEvents; a rule then implements End() and Progress()
// (and Violations(), FlaggedSteps(), AddResolved() where it has them).
// Not thread-safe, like ProfilerRule.

#ifndef DEBUGPLANE_RULES_ENGINE_PROFILER_RULES_PROFILER_RULE_BASE_H_
#define DEBUGPLANE_RULES_ENGINE_PROFILER_RULES_PROFILER_RULE_BASE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "rules_engine/profiler_rules/profiler_rules.h"
#include "rules_engine/rule/rule_parameters.h"

namespace debugplane::rules_engine::profiler_rules_internal {

// Verdict and finding details are cut to this many bytes.
inline constexpr size_t kMaxDetails = 1024;

// RuleVerdict::Issues / NoIssues with `details` cut to kMaxDetails.
RuleVerdict Issues(std::string details);
RuleVerdict NoIssues(std::string details);

// Declares the parameters every profiler rule takes (scan_interval_us).
void CommonParameters(RuleParameterReader& p);

// A percentage parameter: `name` in [0, 100], `default_value` when absent.
double PercentParameter(RuleParameterReader& p, absl::string_view name, double default_value);

// The details' texts.
// `seconds` since the epoch as UTC to the tenth (rounded):
// "2026-11-21T22:35:00.0Z"; a non-finite or absurd value as the number.
std::string FormatTimestamp(double seconds);
// `us` since the epoch as UTC to the millisecond (truncated):
// "2026-11-22T07:10:36.525Z".
std::string FormatTimestampMicros(int64_t us);
// A percentage to the tenth: "12.5%".
std::string FormatPercent(double value);
// Appends `part` to the "a; b; c" list `*out`, unless *out already holds
// kMaxDetails bytes.
void AppendPart(std::string* out, absl::string_view part);

class ProfilerRuleBase : public ProfilerRule {
 public:
  // The input a family's verdicts rest on: OnEnd() is an Error when none of
  // it was fed, and the rule wants it (WantsSystemMetrics() /
  // WantsFrameworkEvents() by default; a rule may want the other one too).
  enum class Input { kSystemMetrics, kFrameworkEvents };

  explicit ProfilerRuleBase(Input primary) : primary_(primary) {}

  bool WantsSystemMetrics() const override { return primary_ == Input::kSystemMetrics; }
  bool WantsFrameworkEvents() const override { return primary_ == Input::kFrameworkEvents; }

  // The verdict reached before, if any (sticky); else an Error when none of
  // the primary input was fed; else End(), which becomes the verdict.
  RuleVerdict OnEnd() final;
  // The parameters, the counts fed (system points plus framework events),
  // Violations(), FlaggedSteps(), and the verdict's details once concluded;
  // before that Progress() (cut to kMaxDetails), or "no system metrics yet"
  // for a system-metric rule that has seen none.
  ProfilerRuleFinding Finding() const final;

  // The parameters as the rule uses them (RuleParameterReader::resolved()
  // plus AddResolved()), for Finding().
  void set_parameters(std::map<std::string, std::string> parameters) {
    parameters_ = std::move(parameters);
  }
  // Adds the parameters RuleParameterReader's getters do not record (lists).
  virtual void AddResolved(std::map<std::string, std::string>& resolved) const { (void)resolved; }

 protected:
  // OnEnd() while undecided, with some of the primary input seen:
  // kNoIssuesFound, kIssuesFound or kError.
  virtual RuleVerdict End() = 0;
  // Finding().details while undecided: what the rule has seen so far.
  virtual std::string Progress() const = 0;
  // Finding().violations: how often the rule's condition held so far (what
  // the report's "triggered" column counts).
  virtual int64_t Violations() const { return 0; }
  // Finding().flagged_steps: steps the rule singles out, ascending.
  virtual std::vector<int64_t> FlaggedSteps() const { return {}; }

  // Feeds `points` (or `events`) to `evaluate`, one at a time, counting them;
  // `evaluate(item)` returns whether the rule fired, having stored the
  // verdict with Fire(). Returns the sticky verdict when already concluded
  // (nothing is fed or counted then), the verdict when the rule fires now,
  // else Continue. (A template so that a family can inline its per-item call:
  // a virtual call per point and rule was a visible share of the bench.)
  template <typename Evaluate>
  RuleVerdict FeedPoints(absl::Span<const SystemMetricPoint> points, Evaluate evaluate) {
    return Feed(points, points_seen_, evaluate);
  }
  template <typename Evaluate>
  RuleVerdict FeedEvents(absl::Span<const FrameworkEvent> events, Evaluate evaluate) {
    return Feed(events, events_seen_, evaluate);
  }
  // Whether `verdict` is kIssuesFound (the rule fired); then keeps it for
  // Feed*.
  // (The verdict is kept rather than returned: a RuleVerdict per point and
  // rule, even an empty one, showed in the profile.)
  bool Fire(RuleVerdict verdict) {
    if (verdict.kind != RuleVerdict::Kind::kIssuesFound) return false;
    fired_ = std::move(verdict);
    return true;
  }
  // Makes `verdict` the rule's terminal verdict and returns it.
  RuleVerdict Conclude(RuleVerdict verdict) {
    done_ = true;
    final_ = verdict;
    return verdict;
  }
  bool done() const { return done_; }
  const RuleVerdict& final_verdict() const { return final_; }
  bool concluded_with_issues() const {
    return done_ && final_.kind == RuleVerdict::Kind::kIssuesFound;
  }
  int64_t points_seen() const { return points_seen_; }
  int64_t events_seen() const { return events_seen_; }

 private:
  template <typename Item, typename Evaluate>
  RuleVerdict Feed(absl::Span<const Item> items, int64_t& seen, Evaluate& evaluate) {
    if (done_) return final_;
    seen += static_cast<int64_t>(items.size());
    for (const Item& item : items) {
      if (evaluate(item)) return Conclude(std::move(fired_));
    }
    return RuleVerdict::Continue();
  }

  const Input primary_;
  bool done_ = false;
  RuleVerdict final_;
  RuleVerdict fired_;
  int64_t points_seen_ = 0;
  int64_t events_seen_ = 0;
  std::map<std::string, std::string> parameters_;
};

// Creates rule T (constructed from a RuleParameterReader over `parameters`)
// with its resolved parameters set. INVALID_ARGUMENT naming the parameter
// when T's constructor refused one (RuleParameterReader::status()).
template <typename T>
absl::StatusOr<std::unique_ptr<ProfilerRule>> MakeProfilerRule(const std::string& name,
                                                               const RuleParameters& parameters) {
  RuleParameterReader p(name, parameters);
  auto rule = std::make_unique<T>(p);
  if (absl::Status s = p.status(); !s.ok()) return s;
  std::map<std::string, std::string> resolved = p.resolved();
  rule->AddResolved(resolved);
  rule->set_parameters(std::move(resolved));
  return std::unique_ptr<ProfilerRule>(std::move(rule));
}

}  // namespace debugplane::rules_engine::profiler_rules_internal

#endif  // DEBUGPLANE_RULES_ENGINE_PROFILER_RULES_PROFILER_RULE_BASE_H_
