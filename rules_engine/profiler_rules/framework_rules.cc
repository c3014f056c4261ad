#include "rules_engine/profiler_rules/framework_rules.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "rules_engine/profiler/framework_phase.h"
#include "rules_engine/profiler_rules/profiler_rule_base.h"
#include "rules_engine/rule/rule_parameters.h"

namespace debugplane::rules_engine {
namespace profiler_rules_internal {
namespace {

// A duration for people: "6.2 ms", "3.41 s", "21.5 min".
std::string Duration(double us) {
  const double a = std::fabs(us);
  if (a < 1e6) return absl::StrFormat("%.1f ms", us / 1e3);
  if (a < 120e6) return absl::StrFormat("%.2f s", us / 1e6);
  return absl::StrFormat("%.1f min", us / 60e6);
}

// The framework rules' input hooks: events (and, for a rule that wants
// them, system metrics) one at a time through virtual calls (a few
// thousand events per step at most), and the wall clock through Tick().
class FrameworkRule : public ProfilerRuleBase {
 public:
  FrameworkRule() : ProfilerRuleBase(Input::kFrameworkEvents) {}

  RuleVerdict OnMetrics(absl::Span<const SystemMetricPoint> points) final {
    if (!WantsSystemMetrics()) return done() ? final_verdict() : RuleVerdict::Continue();
    return FeedPoints(points,
                      [this](const SystemMetricPoint& point) { return Fire(OnPoint(point)); });
  }
  RuleVerdict OnFrameworkEvents(absl::Span<const FrameworkEvent> events) final {
    return FeedEvents(events, [this](const FrameworkEvent& event) { return Fire(OnEvent(event)); });
  }
  RuleVerdict OnTick(absl::Time now) final {
    if (done()) return final_verdict();
    RuleVerdict v = Tick(now);
    if (v.kind == RuleVerdict::Kind::kIssuesFound) return Conclude(std::move(v));
    return RuleVerdict::Continue();
  }

 protected:
  // kContinue or kIssuesFound.
  virtual RuleVerdict OnEvent(const FrameworkEvent& event) = 0;
  // Only called when WantsSystemMetrics(). kContinue or kIssuesFound.
  virtual RuleVerdict OnPoint(const SystemMetricPoint& point) {
    (void)point;
    return RuleVerdict::Continue();
  }
  // kContinue or kIssuesFound.
  virtual RuleVerdict Tick(absl::Time now) {
    (void)now;
    return RuleVerdict::Continue();
  }
};

// ---------------------------------------------------------------------------
// StepOutlier. A step's duration is the "dur" of its Step:ModeKeys.<MODE>
// event. Durations form one series per (node, mode) (nodes may differ in
// hardware; modes differ in work); `mode` restricts the modes (default: all
// of TRAIN, EVAL, GLOBAL, PREDICT, which covers the docs' "EVAL and TRAIN"
// and runs that never set a mode). An outlier is a step whose duration
// differs from the series' mean by more than `stddev` standard deviations
// (population standard deviation, numpy's default; both directions, as the
// docs say "larger or smaller"); the rule fires when a series has more than
// `n_outliers` outliers.
// Decisions for determinism and incrementality: a series is evaluated over
// all its durations so far each time it has grown by kCheckEvery durations
// (by max(kCheckEvery, 1%) past 10,000, so a long run costs O(n) checks of
// O(n) each only up to a constant factor), and at OnEnd; these points depend
// on the data alone. Mean and deviation are those of the evaluated
// durations, outliers included (as the docs' "sigmas of the entire step
// durations"). The outliers reported (details, flagged_steps, violations)
// are those of each series' last evaluation.
class StepOutlier : public FrameworkRule {
 public:
  explicit StepOutlier(RuleParameterReader& p)
      : stddev_(p.Float("stddev", 5, 0)), n_outliers_(p.Int("n_outliers", 10, 0)) {
    if (p.Has("stddev") && stddev_ <= 0) p.Fail("stddev", "must be greater than 0");
    for (const std::string& item : p.List("mode")) {
      std::string mode = absl::AsciiStrToUpper(item);
      absl::string_view m = mode;
      absl::ConsumePrefix(&m, "MODEKEYS.");
      if (m != "TRAIN" && m != "EVAL" && m != "GLOBAL" && m != "PREDICT") {
        p.Fail("mode", absl::StrCat("must be TRAIN, EVAL, GLOBAL or PREDICT (or a list of them), "
                                    "got '",
                                    item, "'"));
        break;
      }
      modes_.insert(std::string(m));
    }
    CommonParameters(p);
  }
  std::string name() const override { return "StepOutlier"; }
  void AddResolved(std::map<std::string, std::string>& resolved) const override {
    resolved["mode"] = modes_.empty() ? "all" : absl::StrJoin(modes_, ",");
  }

 protected:
  struct Series {
    std::vector<std::pair<int64_t, int64_t>> steps;  // (step, duration us).
    size_t next_check = kCheckEvery;
    size_t evaluated = 0;  // Durations of the last evaluation.
    double mean = 0, sd = 0;
    std::vector<size_t> outliers;  // Indices into steps, last evaluation.
  };
  using Key = std::pair<std::string, std::string>;  // (node, mode).

  RuleVerdict OnEvent(const FrameworkEvent& e) override {
    std::string mode = StepEventMode(e.name);
    if (mode.empty() || (!modes_.empty() && modes_.count(mode) == 0)) {
      return RuleVerdict::Continue();
    }
    Series& s = series_[{e.node_id, mode}];
    s.steps.emplace_back(e.step, e.duration_us);
    if (s.steps.size() < s.next_check) return RuleVerdict::Continue();
    s.next_check = s.steps.size() + std::max<size_t>(kCheckEvery, s.steps.size() / 100);
    return Evaluate({e.node_id, mode}, s);
  }

  RuleVerdict End() override {
    for (auto& [key, s] : series_) {
      if (s.evaluated == s.steps.size()) continue;
      RuleVerdict v = Evaluate(key, s);
      if (v.kind == RuleVerdict::Kind::kIssuesFound) return v;
    }
    if (series_.empty()) {
      return NoIssues(absl::StrCat("no step events (Step:ModeKeys.",
                                   modes_.empty() ? "<mode>" : absl::StrJoin(modes_, "|"),
                                   ") among ", events_seen(), " framework events"));
    }
    std::string details;
    for (const auto& [key, s] : series_) {
      absl::StrAppend(&details, details.empty() ? "" : "; ", Describe(key, s), ", not more than ",
                      "n_outliers ", n_outliers_);
    }
    return NoIssues(std::move(details));
  }

  std::string Progress() const override {
    int64_t steps = 0;
    for (const auto& [key, s] : series_) steps += static_cast<int64_t>(s.steps.size());
    std::string details =
        absl::StrCat(steps, " step durations in ", series_.size(), " series", " so far");
    for (const auto& [key, s] : series_) {
      if (s.evaluated > 0) absl::StrAppend(&details, "; ", Describe(key, s));
    }
    return details;
  }

  int64_t Violations() const override {
    int64_t outliers = 0;
    for (const auto& [key, s] : series_) outliers += static_cast<int64_t>(s.outliers.size());
    return outliers;
  }
  std::vector<int64_t> FlaggedSteps() const override {
    std::set<int64_t> steps;
    for (const auto& [key, s] : series_) {
      for (size_t i : s.outliers) steps.insert(s.steps[i].first);
    }
    return std::vector<int64_t>(steps.begin(), steps.end());
  }

 private:
  RuleVerdict Evaluate(const Key& key, Series& s) {
    const size_t n = s.steps.size();
    double sum = 0;
    for (const auto& [step, d] : s.steps) sum += static_cast<double>(d);
    const double mean = sum / static_cast<double>(n);
    double squares = 0;
    for (const auto& [step, d] : s.steps) {
      const double x = static_cast<double>(d) - mean;
      squares += x * x;
    }
    s.mean = mean;
    s.sd = std::sqrt(squares / static_cast<double>(n));
    s.evaluated = n;
    s.outliers.clear();
    const double limit = stddev_ * s.sd;
    for (size_t i = 0; i < n; ++i) {
      if (std::fabs(static_cast<double>(s.steps[i].second) - mean) > limit) {
        s.outliers.push_back(i);
      }
    }
    if (static_cast<int64_t>(s.outliers.size()) <= n_outliers_) return RuleVerdict::Continue();
    return Issues(absl::StrCat(Describe(key, s), ", more than n_outliers ", n_outliers_));
  }

  // "12 outlier steps in TRAIN on vm: 71 (306.1 ms), ... (more than 5
  // standard deviations from the mean 8.9 ms, standard deviation 42.1 ms,
  // over 600 steps)".
  std::string Describe(const Key& key, const Series& s) const {
    std::string out = absl::StrCat(
        s.outliers.size(), s.outliers.size() == 1 ? " outlier" : " outliers", " in ", key.second,
        " steps on ", key.first.empty() ? "?" : key.first, " (durations more than ",
        absl::StrFormat("%g", stddev_), " standard deviations from the mean ", Duration(s.mean),
        ", standard deviation ", Duration(s.sd), ", over ", s.evaluated, " steps)");
    if (s.outliers.empty()) return out;
    absl::StrAppend(&out, ": step");
    constexpr size_t kListed = 24;
    for (size_t k = 0; k < s.outliers.size() && k < kListed; ++k) {
      const auto& [step, d] = s.steps[s.outliers[k]];
      absl::StrAppend(&out, k == 0 ? " " : ", ", step, " (", Duration(static_cast<double>(d)), ")");
    }
    if (s.outliers.size() > kListed) {
      absl::StrAppend(&out, " and ", s.outliers.size() - kListed, " more");
    }
    return out;
  }

  double stddev_;
  int64_t n_outliers_;
  std::set<std::string> modes_;  // Empty: all.
  std::map<Key, Series> series_;
};

// ---------------------------------------------------------------------------
// MaxInitializationTime. Initialization time = start of the first step
// event read (Step:ModeKeys.<MODE>, in file order) minus the training start,
// the earliest timestamp of the data seen so far: system metrics (which the
// rule also reads: the system monitor starts with the job, before the
// training script creates its profiler hook) and framework events. Fires
// when it exceeds `threshold` minutes. Without a step yet it fires when the
// framework events themselves reach past the threshold (an event without a
// step number starting more than `threshold` after the training start while
// no step event was read before it) or, from OnTick, when the wall clock is
// past it (only once some framework event was read: without framework
// profiling there are no step events to wait for). Events with a step number do not count there:
// they belong to a step already running (smdebug writes an event when it ends, so the events inside
// the first step come before that step's own event). System metrics never count as "time passed" on
// their own: they are read ahead of the framework files, which only appear when they rotate.
// Determinism: the training start only moves earlier as data arrives and
// the first step is fixed by the framework events' order, so once the
// condition holds it keeps holding; the verdict does not depend on how the
// two inputs interleave, only the figures in its details may.
// The training start is the earliest of the system metrics' timestamps, the
// timelines' start_time_since_epoch_in_micros and the events' starts.
class MaxInitializationTime : public FrameworkRule {
 public:
  explicit MaxInitializationTime(RuleParameterReader& p)
      : threshold_min_(p.Float("threshold", 20, 0)),
        threshold_us_(static_cast<int64_t>(std::llround(threshold_min_ * 60e6))) {
    CommonParameters(p);
  }
  std::string name() const override { return "MaxInitializationTime"; }
  bool WantsSystemMetrics() const override { return true; }

 protected:
  RuleVerdict OnPoint(const SystemMetricPoint& pt) override {
    if (!std::isfinite(pt.timestamp) || std::fabs(pt.timestamp) > 9e9) {
      return RuleVerdict::Continue();
    }
    SeeStart(std::llround(pt.timestamp * 1e6), "system metrics");
    return Evaluate();
  }

  RuleVerdict OnEvent(const FrameworkEvent& e) override {
    if (e.timeline_start_us >= 0) SeeStart(e.timeline_start_us, "framework timeline start");
    SeeStart(e.start_us, "framework events");
    if (!has_step_ && !StepEventMode(e.name).empty()) {
      has_step_ = true;
      step_start_us_ = e.start_us;
      step_ = e.step;
      step_name_ = e.name;
    } else if (!has_step_ && e.step < 0) {
      last_framework_us_ = std::max(last_framework_us_, e.start_us);
      has_framework_ = true;
    }
    return Evaluate();
  }

  RuleVerdict Tick(absl::Time now) override {
    // Only once a framework timeline exists: without framework profiling
    // (SageMaker's default is system monitoring only) no step event ever
    // comes, and every job running past the threshold would be flagged.
    if (has_step_ || !has_start_ || events_seen() == 0) return RuleVerdict::Continue();
    const int64_t waited = absl::ToUnixMicros(now) - start_us_;
    if (waited <= threshold_us_) return RuleVerdict::Continue();
    return Issues(absl::StrCat("no step yet ", Duration(static_cast<double>(waited)),
                               " after the training start ", FormatTimestampMicros(start_us_),
                               " (earliest ", start_source_, " timestamp), more than threshold ",
                               Threshold(), " (wall clock ",
                               FormatTimestampMicros(absl::ToUnixMicros(now)), ")"));
  }

  RuleVerdict End() override {
    if (has_step_) {
      return NoIssues(absl::StrCat(Initialization(), ", within threshold ", Threshold()));
    }
    return NoIssues(absl::StrCat("no step event (Step:ModeKeys.<mode>) among ", events_seen(),
                                 " framework events; they reach ",
                                 Duration(static_cast<double>(last_framework_us_ - start_us_)),
                                 " past the training start ", FormatTimestampMicros(start_us_),
                                 ", within threshold ", Threshold()));
  }

  std::string Progress() const override {
    if (has_step_) return Initialization();
    if (!has_start_) return "no data yet";
    return absl::StrCat("waiting for the first step; training start ",
                        FormatTimestampMicros(start_us_), " (earliest ", start_source_,
                        " timestamp), threshold ", Threshold());
  }

  // No FlaggedSteps(): the first step is not an anomaly of a step (the
  // report's step histogram marks those).
  int64_t Violations() const override { return concluded_with_issues() ? 1 : 0; }

 private:
  void SeeStart(int64_t us, const char* source) {
    if (has_start_ && us >= start_us_) return;
    has_start_ = true;
    start_us_ = us;
    start_source_ = source;
  }

  RuleVerdict Evaluate() {
    if (has_step_) {
      if (step_start_us_ - start_us_ <= threshold_us_) return RuleVerdict::Continue();
      return Issues(absl::StrCat(Initialization(), ", more than threshold ", Threshold()));
    }
    if (has_framework_ && last_framework_us_ - start_us_ > threshold_us_) {
      return Issues(absl::StrCat("no step yet: framework events reach ",
                                 Duration(static_cast<double>(last_framework_us_ - start_us_)),
                                 " past the training start ", FormatTimestampMicros(start_us_),
                                 " (earliest ", start_source_,
                                 " timestamp) without a Step:ModeKeys event, more than threshold ",
                                 Threshold()));
    }
    return RuleVerdict::Continue();
  }

  std::string Initialization() const {
    return absl::StrCat("initialization took ",
                        Duration(static_cast<double>(step_start_us_ - start_us_)),
                        ": training start ", FormatTimestampMicros(start_us_), " (earliest ",
                        start_source_, " timestamp), first step ", step_name_, " step ", step_,
                        " at ", FormatTimestampMicros(step_start_us_));
  }
  std::string Threshold() const {
    return absl::StrCat(absl::StrFormat("%g", threshold_min_), " min");
  }

  double threshold_min_;
  int64_t threshold_us_;
  bool has_start_ = false;
  int64_t start_us_ = 0;
  const char* start_source_ = "";
  bool has_step_ = false;
  int64_t step_start_us_ = 0;
  int64_t step_ = -1;
  std::string step_name_;
  bool has_framework_ = false;  // Events without a step number, before the first step.
  int64_t last_framework_us_ = 0;
};

// ---------------------------------------------------------------------------
// OverallFrameworkMetrics: the docs say it "summarizes the time spent on
// framework metrics, such as forward and backward pass, and data loading".
// Decisions: it never reports IssuesFound; OnEnd is NoIssuesFound with the
// summary (also Finding().details while running):
// - steps per mode: count, total, mean and largest duration;
// - per training process (node, args.pid): initialization (first event to
//   first step start), training loop (first step start to last step end),
//   the share of the loop inside steps (union of step intervals; the events
//   of one process arrive in time order, so the union is kept as a running
//   end) and finalization (last step end to last event end), summed over
//   processes;
// - phases: forward (categories "Forward...", backward ("Backward...") and
//   data loading (categories or names with DataIterator, DataLoader,
//   dataset::, GetNext); "...-SubModuleInternal" categories are nested
//   inside their phase's events and are left out of the phase totals;
// - the categories with the most time, each with its total and count.
// Nested events are each counted in full in their category's total, so
// category totals do not add up to wall time.
class OverallFrameworkMetrics : public FrameworkRule {
 public:
  explicit OverallFrameworkMetrics(RuleParameterReader& p) { CommonParameters(p); }
  std::string name() const override { return "OverallFrameworkMetrics"; }

 protected:
  struct Total {
    int64_t count = 0;
    int64_t total_us = 0;
    int64_t max_us = 0;
  };
  static constexpr char kStepPrefix[] = "Step:ModeKeys.";
  using Phase = FrameworkPhase;
  struct Category {
    Total total;
    Phase phase = Phase::kNone;
  };
  struct Process {
    int64_t first_us = std::numeric_limits<int64_t>::max();
    int64_t last_end_us = std::numeric_limits<int64_t>::min();
    bool has_step = false;
    int64_t first_step_us = 0, last_step_end_us = 0;
    int64_t inside_us = 0;  // Union of step intervals.
  };

  RuleVerdict OnEvent(const FrameworkEvent& e) override {
    const int64_t end = e.start_us + e.duration_us;
    Process& p = ProcessOf(e);
    p.first_us = std::min(p.first_us, e.start_us);
    p.last_end_us = std::max(p.last_end_us, end);
    Category& category = CategoryOf(e.category.empty() ? e.name : e.category);
    Add(category.total, e.duration_us);
    if (absl::StartsWith(e.name, kStepPrefix)) {
      const absl::string_view mode = absl::string_view(e.name).substr(sizeof(kStepPrefix) - 1);
      auto it = steps_.find(mode);
      if (it == steps_.end()) it = steps_.emplace(std::string(mode), Total()).first;
      Add(it->second, e.duration_us);
      if (!p.has_step) {
        p.has_step = true;
        p.first_step_us = e.start_us;
        p.last_step_end_us = end;
        p.inside_us = e.duration_us;
      } else {
        p.first_step_us = std::min(p.first_step_us, e.start_us);
        if (e.start_us >= p.last_step_end_us) {
          p.inside_us += e.duration_us;
        } else if (end > p.last_step_end_us) {
          p.inside_us += end - p.last_step_end_us;
        }
        p.last_step_end_us = std::max(p.last_step_end_us, end);
      }
      return RuleVerdict::Continue();
    }
    Phase phase = category.phase;
    if (phase == Phase::kNone && IsDataLoading(e.name)) phase = Phase::kData;
    switch (phase) {
      case Phase::kForward:
        forward_us_ += e.duration_us;
        break;
      case Phase::kBackward:
        backward_us_ += e.duration_us;
        break;
      case Phase::kData:
        data_us_ += e.duration_us;
        break;
      case Phase::kNone:
        break;
    }
    return RuleVerdict::Continue();
  }

  RuleVerdict End() override { return NoIssues(Summary()); }
  std::string Progress() const override {
    return events_seen() == 0 ? "no framework events yet" : Summary();
  }

 private:
  // Consecutive events mostly share category and process: one-entry caches
  // in front of the maps (map nodes do not move).
  Category& CategoryOf(const std::string& key) {
    if (last_category_ == nullptr || *last_category_key_ != key) {
      auto [it, inserted] = categories_.try_emplace(key);
      if (inserted) it->second.phase = PhaseOfCategory(key);
      last_category_key_ = &it->first;
      last_category_ = &it->second;
    }
    return *last_category_;
  }
  Process& ProcessOf(const FrameworkEvent& e) {
    if (last_process_ == nullptr || last_process_key_->second != e.process ||
        last_process_key_->first != e.node_id) {
      auto it = processes_.try_emplace({e.node_id, e.process}).first;
      last_process_key_ = &it->first;
      last_process_ = &it->second;
    }
    return *last_process_;
  }
  static void Add(Total& t, int64_t us) {
    ++t.count;
    t.total_us += us;
    t.max_us = std::max(t.max_us, us);
  }

  std::string Summary() const {
    int64_t step_count = 0;
    for (const auto& [mode, t] : steps_) step_count += t.count;
    std::string s = absl::StrCat(events_seen(), " framework events, ", step_count,
                                 step_count == 1 ? " step" : " steps");
    if (!steps_.empty()) {
      std::vector<std::string> modes;
      for (const auto& [mode, t] : steps_) {
        modes.push_back(absl::StrCat(
            mode, " ", t.count, ": total ", Duration(static_cast<double>(t.total_us)), ", mean ",
            Duration(static_cast<double>(t.total_us) / static_cast<double>(t.count)), ", max ",
            Duration(static_cast<double>(t.max_us))));
      }
      absl::StrAppend(&s, " (", absl::StrJoin(modes, "; "), ")");
    }
    int64_t init = 0, loop = 0, inside = 0, fin = 0;
    int with_steps = 0;
    for (const auto& [key, p] : processes_) {
      if (!p.has_step) continue;
      ++with_steps;
      init += p.first_step_us - p.first_us;
      loop += p.last_step_end_us - p.first_step_us;
      inside += p.inside_us;
      fin += std::max<int64_t>(0, p.last_end_us - p.last_step_end_us);
    }
    if (with_steps > 0) {
      absl::StrAppend(&s, "; initialization ", Duration(static_cast<double>(init)),
                      ", training loop ", Duration(static_cast<double>(loop)));
      if (loop > 0) {
        absl::StrAppend(&s, " (",
                        absl::StrFormat("%.1f%%", 100.0 * static_cast<double>(inside) /
                                                      static_cast<double>(loop)),
                        " inside steps, ", Duration(static_cast<double>(loop - inside)),
                        " between them)");
      }
      absl::StrAppend(&s, ", finalization ", Duration(static_cast<double>(fin)));
      if (with_steps > 1) absl::StrAppend(&s, " (summed over ", with_steps, " processes)");
    }
    absl::StrAppend(&s, "; forward ", Duration(static_cast<double>(forward_us_)), ", backward ",
                    Duration(static_cast<double>(backward_us_)), ", data loading ",
                    Duration(static_cast<double>(data_us_)));
    // A phase with most of the three phases' time is what to look at first.
    const int64_t phases = forward_us_ + backward_us_ + data_us_;
    if (phases > 0 && 2 * data_us_ > phases) {
      absl::StrAppend(&s, " (data loading is ",
                      absl::StrFormat("%.0f%%", 100.0 * static_cast<double>(data_us_) /
                                                    static_cast<double>(phases)),
                      " of them: the data loader is the bottleneck)");
    }
    std::vector<std::pair<std::string, Total>> by_time;
    for (const auto& [name, c] : categories_) by_time.emplace_back(name, c.total);
    std::stable_sort(by_time.begin(), by_time.end(), [](const auto& a, const auto& b) {
      return a.second.total_us > b.second.total_us;
    });
    constexpr size_t kListed = 6;
    absl::StrAppend(&s, "; by category:");
    for (size_t i = 0; i < by_time.size() && i < kListed; ++i) {
      absl::StrAppend(&s, i == 0 ? " " : ", ", by_time[i].first, " ",
                      Duration(static_cast<double>(by_time[i].second.total_us)), " (",
                      by_time[i].second.count, ")");
    }
    if (by_time.size() > kListed) absl::StrAppend(&s, " and ", by_time.size() - kListed, " more");
    if (s.size() > kMaxDetails) s.resize(kMaxDetails);
    return s;
  }

  std::map<std::string, Category> categories_;       // Category (or name when none).
  std::map<std::string, Total, std::less<>> steps_;  // Mode.
  std::map<std::pair<std::string, int64_t>, Process> processes_;
  const std::string* last_category_key_ = nullptr;
  Category* last_category_ = nullptr;
  const std::pair<std::string, int64_t>* last_process_key_ = nullptr;
  Process* last_process_ = nullptr;
  int64_t forward_us_ = 0, backward_us_ = 0, data_us_ = 0;
};

}  // namespace
}  // namespace profiler_rules_internal

std::vector<std::string> FrameworkProfilerRuleNames() {
  return {"MaxInitializationTime", "OverallFrameworkMetrics", "StepOutlier"};
}

absl::StatusOr<std::unique_ptr<ProfilerRule>> CreateFrameworkProfilerRule(
    const std::string& name, const RuleParameters& parameters) {
  using profiler_rules_internal::MakeProfilerRule;
  using profiler_rules_internal::MaxInitializationTime;
  using profiler_rules_internal::OverallFrameworkMetrics;
  using profiler_rules_internal::StepOutlier;
  if (name == "StepOutlier") return MakeProfilerRule<StepOutlier>(name, parameters);
  if (name == "MaxInitializationTime")
    return MakeProfilerRule<MaxInitializationTime>(name, parameters);
  if (name == "OverallFrameworkMetrics")
    return MakeProfilerRule<OverallFrameworkMetrics>(name, parameters);
  return absl::NotFoundError(absl::StrCat("unknown framework profiler rule '", name, "'"));
}

}  // namespace debugplane::rules_engine
