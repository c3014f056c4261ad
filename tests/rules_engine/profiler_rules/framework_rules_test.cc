// The framework profiler rules (StepOutlier, MaxInitializationTime,
// OverallFrameworkMetrics) over the real PyTorch timelines of
// tests/data/profiler/framework/pytorch-step-outlier (12 steps made
// 300 ms slower on purpose) and small synthetic event series.

#include "rules_engine/profiler_rules/framework_rules.h"

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "objectstore/local_object_store.h"
#include "rules_engine/profiler/framework_timeline_reader.h"
#include "rules_engine/profiler_rules/profiler_rules.h"

namespace debugplane::rules_engine {
namespace {

using Kind = RuleVerdict::Kind;
using ::testing::HasSubstr;

const char kStepOutlier[] = DP_TEST_DATA_DIR "/profiler/framework/pytorch-step-outlier";

std::unique_ptr<ProfilerRule> MustCreate(const std::string& name,
                                         const RuleParameters& params = {}) {
  auto rule = CreateProfilerRule(name, params);
  EXPECT_TRUE(rule.ok()) << rule.status();
  return rule.ok() ? std::move(*rule) : nullptr;
}

const std::vector<FrameworkEvent>& Fixture() {
  static const std::vector<FrameworkEvent>* events = [] {
    FrameworkTimelineReader reader(objectstore::OpenLocalPath(kStepOutlier).value());
    auto* e = new std::vector<FrameworkEvent>(reader.ReadNew());
    EXPECT_EQ(reader.malformed_events(), 0);
    return e;
  }();
  return *events;
}

// Feeds `events` in chunks of `chunk` (0: all at once) and ends the run
// unless a chunk concluded.
RuleVerdict RunEvents(ProfilerRule& rule, const std::vector<FrameworkEvent>& events,
                      size_t chunk = 0) {
  if (chunk == 0) chunk = events.size() + 1;
  for (size_t i = 0; i < events.size(); i += chunk) {
    const size_t n = std::min(chunk, events.size() - i);
    RuleVerdict v = rule.OnFrameworkEvents(absl::MakeConstSpan(events.data() + i, n));
    if (v.kind != Kind::kContinue) return v;
  }
  return rule.OnEnd();
}

FrameworkEvent Step(const std::string& mode, int64_t step, int64_t start_us, int64_t dur_us,
                    const std::string& node = "algo-1") {
  FrameworkEvent e;
  e.name = absl::StrCat("Step:ModeKeys.", mode);
  e.category = e.name;
  e.step = step;
  e.start_us = start_us;
  e.duration_us = dur_us;
  e.node_id = node;
  return e;
}
FrameworkEvent Event(const std::string& name, const std::string& category, int64_t start_us,
                     int64_t dur_us) {
  FrameworkEvent e;
  e.name = name;
  e.category = category;
  e.start_us = start_us;
  e.duration_us = dur_us;
  e.node_id = "algo-1";
  return e;
}

TEST(FrameworkRulesTest, NamesAndInputs) {
  EXPECT_THAT(
      FrameworkProfilerRuleNames(),
      ::testing::ElementsAre("MaxInitializationTime", "OverallFrameworkMetrics", "StepOutlier"));
  for (const std::string& name : FrameworkProfilerRuleNames()) {
    EXPECT_THAT(ProfilerRuleNames(), ::testing::Contains(name));
    std::unique_ptr<ProfilerRule> rule = MustCreate(name);
    ASSERT_NE(rule, nullptr);
    EXPECT_EQ(rule->name(), name);
    EXPECT_TRUE(rule->WantsFrameworkEvents());
    // Only MaxInitializationTime takes the training start from system metrics.
    EXPECT_EQ(rule->WantsSystemMetrics(), name == "MaxInitializationTime");
  }
  EXPECT_EQ(CreateFrameworkProfilerRule("CPUBottleneck", {}).status().code(),
            absl::StatusCode::kNotFound);
}

// tests/data/README.md: with the defaults StepOutlier is IssuesFound and names
// exactly the 12 slowed steps (found here from the durations themselves).
TEST(FrameworkRulesTest, StepOutlierFlagsExactlyTheSlowedFixtureSteps) {
  std::vector<int64_t> slow;
  int64_t steps = 0;
  for (const FrameworkEvent& e : Fixture()) {
    if (StepEventMode(e.name).empty()) continue;
    ++steps;
    if (e.duration_us > 100000) slow.push_back(e.step);
  }
  ASSERT_EQ(steps, 640);
  ASSERT_EQ(slow.size(), 12u);

  std::unique_ptr<ProfilerRule> rule = MustCreate("StepOutlier");
  RuleVerdict v = RunEvents(*rule, Fixture());
  EXPECT_EQ(v.kind, Kind::kIssuesFound) << v.details;
  std::cout << "StepOutlier: " << v.details << "\n";
  ProfilerRuleFinding f = rule->Finding();
  EXPECT_EQ(f.status, Kind::kIssuesFound);
  EXPECT_EQ(f.flagged_steps, slow);
  EXPECT_EQ(f.violations, 12);
  EXPECT_EQ(f.details, v.details);
  EXPECT_LE(v.details.size(), 1024u);
  EXPECT_THAT(v.details, HasSubstr("12 outliers in TRAIN steps on vm"));
  EXPECT_THAT(v.details, HasSubstr("more than n_outliers 10"));
  for (int64_t s : slow) EXPECT_THAT(v.details, HasSubstr(absl::StrCat(" ", s, " ("))) << s;
  EXPECT_EQ(f.parameters, (std::map<std::string, std::string>{{"mode", "all"},
                                                              {"n_outliers", "10"},
                                                              {"scan_interval_us", "60000000"},
                                                              {"stddev", "5"}}));
  // Sticky.
  EXPECT_EQ(rule->OnEnd().kind, Kind::kIssuesFound);
  EXPECT_EQ(rule->OnFrameworkEvents(Fixture()).details, v.details);
}

TEST(FrameworkRulesTest, StepOutlierVerdictDoesNotDependOnChunking) {
  std::unique_ptr<ProfilerRule> all = MustCreate("StepOutlier");
  const RuleVerdict expected = RunEvents(*all, Fixture());
  for (size_t chunk : {1u, 7u, 1000u}) {
    SCOPED_TRACE(chunk);
    std::unique_ptr<ProfilerRule> rule = MustCreate("StepOutlier");
    RuleVerdict v = RunEvents(*rule, Fixture(), chunk);
    EXPECT_EQ(v.kind, expected.kind);
    EXPECT_EQ(v.details, expected.details);
    EXPECT_EQ(rule->Finding().flagged_steps, all->Finding().flagged_steps);
  }
}

TEST(FrameworkRulesTest, StepOutlierWithinNOutliersOrOtherModeIsNoIssues) {
  // 12 outliers are not more than n_outliers 12: the run is judged to the
  // end, and the finding still shows them.
  std::unique_ptr<ProfilerRule> rule = MustCreate("StepOutlier", {{"n_outliers", "12"}});
  RuleVerdict v = RunEvents(*rule, Fixture());
  EXPECT_EQ(v.kind, Kind::kNoIssuesFound) << v.details;
  EXPECT_THAT(v.details, HasSubstr("12 outliers in TRAIN steps on vm"));
  EXPECT_THAT(v.details, HasSubstr("over 640 steps"));
  EXPECT_EQ(rule->Finding().flagged_steps.size(), 12u);

  std::unique_ptr<ProfilerRule> eval = MustCreate("StepOutlier", {{"mode", "EVAL"}});
  v = RunEvents(*eval, Fixture());
  EXPECT_EQ(v.kind, Kind::kNoIssuesFound);
  EXPECT_THAT(v.details, HasSubstr("no step events (Step:ModeKeys.EVAL) among 5760"));
  EXPECT_EQ(eval->Finding().parameters.at("mode"), "EVAL");

  // The slowed steps are about 7 standard deviations (of about 41 ms) from
  // the mean over the whole run: stddev 8 sees none at the end.
  std::unique_ptr<ProfilerRule> wide = MustCreate("StepOutlier", {{"stddev", "8"}});
  v = RunEvents(*wide, Fixture());
  EXPECT_EQ(v.kind, Kind::kNoIssuesFound) << v.details;
  EXPECT_TRUE(wide->Finding().flagged_steps.empty());
}

// Both directions count, per (node, mode) series.
TEST(FrameworkRulesTest, StepOutlierSyntheticSeries) {
  std::vector<FrameworkEvent> events;
  int64_t t = 1000000;
  for (int i = 0; i < 300; ++i) {
    const int64_t dur = i == 150 ? 1000 : 100000 + (i % 7) * 1000;  // Step 150: far too fast.
    events.push_back(Step("TRAIN", i, t, dur));
    // EVAL steps on another node, steady: never outliers.
    events.push_back(Step("EVAL", i, t, 50000, "algo-2"));
    t += dur + 10;
  }
  std::unique_ptr<ProfilerRule> rule = MustCreate("StepOutlier", {{"n_outliers", "0"}});
  RuleVerdict v = RunEvents(*rule, events);
  EXPECT_EQ(v.kind, Kind::kIssuesFound) << v.details;
  EXPECT_THAT(v.details, HasSubstr("1 outlier in TRAIN steps on algo-1"));
  EXPECT_THAT(v.details, HasSubstr("step 150 (1.0 ms)"));
  EXPECT_EQ(rule->Finding().flagged_steps, std::vector<int64_t>{150});
  // Decided at the first check (200 TRAIN steps), not at the end.
  EXPECT_THAT(v.details, HasSubstr("over 200 steps"));

  std::unique_ptr<ProfilerRule> none = MustCreate("StepOutlier");
  v = RunEvents(*none, events);
  EXPECT_EQ(v.kind, Kind::kNoIssuesFound);
  EXPECT_THAT(v.details, HasSubstr("0 outliers in EVAL steps on algo-2"));
  EXPECT_THAT(v.details, HasSubstr("1 outlier in TRAIN steps on algo-1"));
}

TEST(FrameworkRulesTest, MaxInitializationTimeFromSystemMetricsAndFirstStep) {
  const int64_t t0 = 1700000000000000;  // us.
  SystemMetricPoint point;
  point.timestamp = static_cast<double>(t0) / 1e6;
  point.dim = MetricDimension::kCpuUtilization;
  const std::vector<FrameworkEvent> events = {
      Event("DataLoader", "DataIterator", t0 + 60000000, 1000),
      Step("TRAIN", 0, t0 + 180000000, 5000),  // 3 minutes after the start.
  };

  // Threshold 2 min: fires at the first step, whichever input comes first.
  for (bool metrics_first : {true, false}) {
    SCOPED_TRACE(metrics_first);
    std::unique_ptr<ProfilerRule> rule = MustCreate("MaxInitializationTime", {{"threshold", "2"}});
    RuleVerdict v;
    if (metrics_first) {
      EXPECT_EQ(rule->OnMetrics({point}).kind, Kind::kContinue);
      v = rule->OnFrameworkEvents(events);
    } else {
      // From the events alone the start is the DataLoader event: 2 min.
      EXPECT_EQ(rule->OnFrameworkEvents(events).kind, Kind::kContinue);
      v = rule->OnMetrics({point});
    }
    EXPECT_EQ(v.kind, Kind::kIssuesFound) << v.details;
    EXPECT_THAT(v.details, HasSubstr("initialization took 3.0 min"));
    EXPECT_THAT(v.details, HasSubstr("(earliest system metrics timestamp)"));
    EXPECT_THAT(v.details, HasSubstr("first step Step:ModeKeys.TRAIN step 0"));
    EXPECT_THAT(v.details, HasSubstr("more than threshold 2 min"));
    EXPECT_EQ(rule->Finding().violations, 1);
    // Steps are flagged only by StepOutlier (the report's histogram marks them).
    EXPECT_TRUE(rule->Finding().flagged_steps.empty());
  }

  // Default threshold (20 min): NoIssuesFound at the end.
  std::unique_ptr<ProfilerRule> rule = MustCreate("MaxInitializationTime");
  EXPECT_EQ(rule->OnMetrics({point}).kind, Kind::kContinue);
  EXPECT_EQ(rule->OnFrameworkEvents(events).kind, Kind::kContinue);
  EXPECT_EQ(rule->OnTick(absl::FromUnixMicros(t0 + 3600000000)).kind, Kind::kContinue);
  RuleVerdict v = rule->OnEnd();
  EXPECT_EQ(v.kind, Kind::kNoIssuesFound);
  EXPECT_THAT(v.details, HasSubstr("within threshold 20 min"));
  EXPECT_EQ(
      rule->Finding().parameters,
      (std::map<std::string, std::string>{{"scan_interval_us", "60000000"}, {"threshold", "20"}}));
}

TEST(FrameworkRulesTest, MaxInitializationTimeOnTheFixture) {
  // Framework events alone: the training start is the timeline's
  // start_time_since_epoch_in_micros; the first step begins 8.5 ms later.
  // (The forward events before it in file order carry step numbers: they
  // are inside step 0, not time without a step.)
  std::unique_ptr<ProfilerRule> rule =
      MustCreate("MaxInitializationTime", {{"threshold", "0.001"}});  // 60 ms.
  RuleVerdict v = RunEvents(*rule, Fixture());
  EXPECT_EQ(v.kind, Kind::kNoIssuesFound) << v.details;
  EXPECT_THAT(v.details, HasSubstr("initialization took 8.5 ms"));
  EXPECT_THAT(v.details, HasSubstr("framework timeline start"));
  std::unique_ptr<ProfilerRule> strict = MustCreate("MaxInitializationTime", {{"threshold", "0"}});
  v = RunEvents(*strict, Fixture());
  EXPECT_EQ(v.kind, Kind::kIssuesFound) << v.details;

  // With system metrics from a minute earlier, a 0.5 min threshold is passed.
  std::unique_ptr<ProfilerRule> early = MustCreate("MaxInitializationTime", {{"threshold", "0.5"}});
  SystemMetricPoint point;
  point.timestamp = (1795331436525518.0 + 8488 - 60000000) / 1e6;
  EXPECT_EQ(early->OnMetrics({point}).kind, Kind::kContinue);
  v = RunEvents(*early, Fixture());
  EXPECT_EQ(v.kind, Kind::kIssuesFound) << v.details;
  EXPECT_THAT(v.details, HasSubstr("initialization took 60.00 s"));
  EXPECT_THAT(v.details, HasSubstr("first step Step:ModeKeys.TRAIN step 0 at 2026-11-22T"));
  EXPECT_THAT(v.details, HasSubstr(".534Z"));
}

TEST(FrameworkRulesTest, MaxInitializationTimeWithoutAStep) {
  const int64_t t0 = 1700000000000000;
  SystemMetricPoint point;
  point.timestamp = static_cast<double>(t0) / 1e6;

  // OnTick: wall clock past the threshold with no step yet.
  std::unique_ptr<ProfilerRule> rule = MustCreate("MaxInitializationTime", {{"threshold", "1"}});
  EXPECT_EQ(rule->OnTick(absl::FromUnixMicros(t0 + 120000000)).kind, Kind::kContinue);  // No data.
  EXPECT_EQ(rule->OnMetrics({point}).kind, Kind::kContinue);
  // System metrics alone (no framework profiling, so no step will come):
  // never flagged by the clock.
  EXPECT_EQ(rule->OnTick(absl::FromUnixMicros(t0 + 120000000)).kind, Kind::kContinue);
  EXPECT_EQ(rule->OnFrameworkEvents({Event("a", "DataIterator", t0 + 1000000, 10)}).kind,
            Kind::kContinue);
  EXPECT_EQ(rule->OnTick(absl::FromUnixMicros(t0 + 50000000)).kind, Kind::kContinue);
  RuleVerdict v = rule->OnTick(absl::FromUnixMicros(t0 + 61000000));
  EXPECT_EQ(v.kind, Kind::kIssuesFound) << v.details;
  EXPECT_THAT(v.details, HasSubstr("no step yet 61.00 s after the training start"));
  EXPECT_EQ(rule->Finding().status, Kind::kIssuesFound);
  // A step arriving later does not undo it.
  EXPECT_EQ(rule->OnFrameworkEvents({Step("TRAIN", 0, t0 + 62000000, 10)}).kind,
            Kind::kIssuesFound);

  // Data path: framework events past the threshold and still no step.
  std::unique_ptr<ProfilerRule> data = MustCreate("MaxInitializationTime", {{"threshold", "1"}});
  EXPECT_EQ(data->OnFrameworkEvents({Event("a", "DataIterator", t0, 10)}).kind, Kind::kContinue);
  EXPECT_EQ(data->OnFrameworkEvents({Event("b", "DataIterator", t0 + 50000000, 40000000)}).kind,
            Kind::kContinue);  // Starts within the minute.
  v = data->OnFrameworkEvents({Event("c", "DataIterator", t0 + 70000000, 10)});
  EXPECT_EQ(v.kind, Kind::kIssuesFound) << v.details;
  EXPECT_THAT(v.details, HasSubstr("no step yet: framework events reach 70.00 s"));

  // No step and not past the threshold at the end.
  std::unique_ptr<ProfilerRule> short_run = MustCreate("MaxInitializationTime");
  EXPECT_EQ(short_run->OnFrameworkEvents({Event("a", "DataIterator", t0, 10)}).kind,
            Kind::kContinue);
  v = short_run->OnEnd();
  EXPECT_EQ(v.kind, Kind::kNoIssuesFound);
  EXPECT_THAT(v.details, HasSubstr("no step event"));
}

TEST(FrameworkRulesTest, OverallFrameworkMetricsSummarizesTheFixture) {
  int64_t step_total = 0;
  int64_t forward_total = 0;
  for (const FrameworkEvent& e : Fixture()) {
    if (!StepEventMode(e.name).empty()) step_total += e.duration_us;
    if (e.category == "Forward") forward_total += e.duration_us;
  }
  std::unique_ptr<ProfilerRule> rule = MustCreate("OverallFrameworkMetrics");
  EXPECT_EQ(rule->OnFrameworkEvents(Fixture()).kind, Kind::kContinue);
  ProfilerRuleFinding running = rule->Finding();
  EXPECT_EQ(running.status, Kind::kContinue);
  EXPECT_THAT(running.details, HasSubstr("5760 framework events, 640 steps"));
  EXPECT_EQ(running.datapoints, 5760);

  RuleVerdict v = rule->OnEnd();
  EXPECT_EQ(v.kind, Kind::kNoIssuesFound);
  std::cout << "OverallFrameworkMetrics: " << v.details << "\n";
  EXPECT_EQ(v.details, running.details);
  EXPECT_LE(v.details.size(), 1024u);
  EXPECT_THAT(v.details, HasSubstr(absl::StrFormat("TRAIN 640: total %.2f s", step_total / 1e6)));
  EXPECT_THAT(v.details, HasSubstr(absl::StrFormat("forward %.2f s", forward_total / 1e6)));
  EXPECT_THAT(v.details, HasSubstr("backward 0.0 ms, data loading 0.0 ms"));
  EXPECT_THAT(v.details, HasSubstr("% inside steps"));
  EXPECT_THAT(v.details, HasSubstr("by category: "));
  EXPECT_THAT(v.details, HasSubstr("Forward-SubModuleInternal "));
  EXPECT_EQ(rule->Finding().violations, 0);
}

TEST(FrameworkRulesTest, OverallFrameworkMetricsPhasesAndStepShare) {
  // One process: 1 s of initialization, two 1 s steps 1 s apart, 0.5 s after.
  const int64_t s = 1000000;
  std::vector<FrameworkEvent> events = {
      Event("GetNext", "DataIterator", 0, s / 2),
      Step("TRAIN", 0, s, s),
      Event("Model", "Forward", s, s / 4),
      Event("Model", "Backward", s + s / 4, s / 2),
      Event("Linear", "Forward-SubModuleInternal", s, s / 8),
      Step("TRAIN", 1, 3 * s, s),
      Event("Save", "Other", 4 * s, s / 2),
  };
  std::unique_ptr<ProfilerRule> rule = MustCreate("OverallFrameworkMetrics");
  RuleVerdict v = RunEvents(*rule, events);
  EXPECT_EQ(v.kind, Kind::kNoIssuesFound);
  EXPECT_THAT(v.details, HasSubstr("7 framework events, 2 steps (TRAIN 2: total 2.00 s, mean "
                                   "1.00 s, max 1.00 s)"));
  EXPECT_THAT(v.details, HasSubstr("initialization 1.00 s, training loop 3.00 s (66.7% inside "
                                   "steps, 1.00 s between them), finalization 500.0 ms"));
  EXPECT_THAT(v.details, HasSubstr("forward 250.0 ms, backward 500.0 ms, data loading 500.0 ms"));
}

TEST(FrameworkRulesTest, NoFrameworkEventIsAnErrorNamingTheDirectory) {
  for (const std::string& name : FrameworkProfilerRuleNames()) {
    SCOPED_TRACE(name);
    std::unique_ptr<ProfilerRule> rule = MustCreate(name);
    if (rule->WantsSystemMetrics()) {
      SystemMetricPoint point;
      point.timestamp = 1700000000;
      EXPECT_EQ(rule->OnMetrics({point}).kind, Kind::kContinue);
    }
    RuleVerdict v = rule->OnEnd();
    EXPECT_EQ(v.kind, Kind::kError);
    EXPECT_THAT(v.details, HasSubstr("no framework events were read"));
    EXPECT_THAT(v.details, HasSubstr("framework/pevents"));
    EXPECT_EQ(rule->Finding().status, Kind::kError);
  }
}

TEST(FrameworkRulesTest, BadParametersAreNamed) {
  struct Case {
    const char* rule;
    RuleParameters params;
    const char* named;
  };
  const std::vector<Case> cases = {
      {"StepOutlier", {{"stddev", "-1"}}, "parameter 'stddev'"},
      {"StepOutlier", {{"stddev", "0"}}, "parameter 'stddev'"},
      {"StepOutlier", {{"n_outliers", "ten"}}, "parameter 'n_outliers'"},
      {"StepOutlier", {{"mode", "TRAINING"}}, "parameter 'mode'"},
      {"StepOutlier", {{"sigma", "3"}}, "'sigma'"},
      {"MaxInitializationTime", {{"threshold", "soon"}}, "parameter 'threshold'"},
      {"MaxInitializationTime", {{"threshold", "-5"}}, "parameter 'threshold'"},
      {"OverallFrameworkMetrics", {{"scan_interval_us", "0"}}, "parameter 'scan_interval_us'"},
      {"OverallFrameworkMetrics", {{"threshold", "1"}}, "'threshold'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.named);
    auto rule = CreateProfilerRule(c.rule, c.params);
    ASSERT_FALSE(rule.ok());
    EXPECT_EQ(rule.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(rule.status().message()), HasSubstr(c.named));
  }
  // Accepted spellings of mode, and the reserved keys.
  auto ok = CreateProfilerRule("StepOutlier", {{"mode", "['train', 'ModeKeys.EVAL']"},
                                               {"base_trial", "job"},
                                               {"rule_to_invoke", "StepOutlier"}});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->Finding().parameters.at("mode"), "EVAL,TRAIN");
}

}  // namespace
}  // namespace debugplane::rules_engine
