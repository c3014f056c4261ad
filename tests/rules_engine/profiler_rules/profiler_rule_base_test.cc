// The scaffolding all built-in profiler rules share (profiler_rule_base.h),
// checked over every rule of both families through the public interface.

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rules_engine/profiler_rules/profiler_rules.h"

namespace debugplane::rules_engine {
namespace {

using Kind = RuleVerdict::Kind;
using ::testing::HasSubstr;

std::unique_ptr<ProfilerRule> Create(const std::string& name) {
  auto rule = CreateProfilerRule(name, {});
  EXPECT_TRUE(rule.ok()) << name << ": " << rule.status();
  return rule.ok() ? *std::move(rule) : nullptr;
}

bool IsFrameworkRule(const std::string& name) {
  return name == "StepOutlier" || name == "MaxInitializationTime" ||
         name == "OverallFrameworkMetrics";
}

TEST(ProfilerRuleBaseTest, WithoutItsInputEveryRuleEndsInAStickyErrorNamingIt) {
  for (const std::string& name : ProfilerRuleNames()) {
    SCOPED_TRACE(name);
    std::unique_ptr<ProfilerRule> rule = Create(name);
    ASSERT_NE(rule, nullptr);
    const bool framework = IsFrameworkRule(name);
    EXPECT_EQ(rule->WantsFrameworkEvents(), framework);
    const ProfilerRuleFinding waiting = rule->Finding();
    EXPECT_EQ(waiting.rule, name);
    EXPECT_EQ(waiting.status, Kind::kContinue);
    EXPECT_EQ(waiting.datapoints, 0);
    EXPECT_EQ(waiting.parameters.at("scan_interval_us"), "60000000");
    if (!framework) {
      EXPECT_EQ(waiting.details, "no system metrics yet");
    }
    const RuleVerdict end = rule->OnEnd();
    EXPECT_EQ(end.kind, Kind::kError);
    EXPECT_THAT(end.details, HasSubstr(framework ? "no framework events were read"
                                                 : "no system metrics were read"));
    // Sticky: every later call gives the verdict again, and feeds nothing.
    SystemMetricPoint point;
    point.type = "cpu", point.name = "cpu0", point.dimension = "CPUUtilization";
    point.dim = MetricDimension::kCpuUtilization, point.node_id = "algo-1";
    point.value = 99, point.timestamp = 1795300000;
    const std::vector<SystemMetricPoint> points(3, point);
    EXPECT_EQ(rule->OnMetrics(points).kind, Kind::kError);
    EXPECT_EQ(rule->OnEnd().details, end.details);
    const ProfilerRuleFinding done = rule->Finding();
    EXPECT_EQ(done.status, Kind::kError);
    EXPECT_EQ(done.details, end.details);
    EXPECT_EQ(done.datapoints, 0);
  }
}

TEST(ProfilerRuleBaseTest, RulesCountOnlyTheInputTheyWant) {
  FrameworkEvent event;
  event.name = "Step:ModeKeys.TRAIN";
  event.step = 1;
  event.start_us = 1795300000000000;
  event.timeline_start_us = event.start_us;
  event.duration_us = 1000;
  event.node_id = "algo-1";
  const std::vector<FrameworkEvent> events(2, event);
  SystemMetricPoint point;
  point.type = "cpu", point.name = "cpu0", point.dimension = "CPUUtilization";
  point.dim = MetricDimension::kCpuUtilization, point.node_id = "algo-1";
  point.value = 1, point.timestamp = 1795300000;
  const std::vector<SystemMetricPoint> points(5, point);
  for (const std::string& name : ProfilerRuleNames()) {
    SCOPED_TRACE(name);
    std::unique_ptr<ProfilerRule> rule = Create(name);
    ASSERT_NE(rule, nullptr);
    rule->OnFrameworkEvents(events);
    rule->OnMetrics(points);
    const int64_t want =
        (rule->WantsFrameworkEvents() ? 2 : 0) + (rule->WantsSystemMetrics() ? 5 : 0);
    EXPECT_EQ(rule->Finding().datapoints, want);
    // With its primary input seen, OnEnd is the rule's own verdict.
    EXPECT_NE(rule->OnEnd().kind, Kind::kError);
  }
}

}  // namespace
}  // namespace debugplane::rules_engine
