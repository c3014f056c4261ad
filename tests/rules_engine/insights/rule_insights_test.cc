#include "rules_engine/insights/rule_insights.h"

#include <string>

#include "core/jobs/rule_catalog.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace debugplane::rules_engine::insights {
namespace {

using ::testing::HasSubstr;

TEST(RuleDetailsTest, TensorRuleDetails) {
  const RuleFinding f = ParseRuleDetails(
      "step 12 (TRAIN step 10): gradient/fc1.weight mean |x| 1.5e-39 < threshold 1e-07");
  EXPECT_EQ(f.step, 12);
  EXPECT_EQ(f.tensor, "gradient/fc1.weight");
  ASSERT_TRUE(f.value.has_value());
  EXPECT_DOUBLE_EQ(*f.value, 1.5e-39);
  EXPECT_THAT(f.message, HasSubstr("threshold"));
}

TEST(RuleDetailsTest, ProfilerProseAndNothing) {
  RuleFinding f = ParseRuleDetails(
      "initialization took 25 min: training start ..., first step Step:ModeKeys.TRAIN step 0 at x");
  EXPECT_EQ(f.step, 0);
  EXPECT_TRUE(f.tensor.empty());
  EXPECT_FALSE(f.value.has_value());
  f = ParseRuleDetails("no data: DebugHookConfig.S3OutputPath does not exist");
  EXPECT_FALSE(f.step.has_value());
  EXPECT_TRUE(f.tensor.empty());
  f = ParseRuleDetails("");
  EXPECT_TRUE(f.message.empty());
  f = ParseRuleDetails("step 99999999999999999999999 (x");
  EXPECT_FALSE(f.step.has_value() && *f.step < 0);
}

TEST(RuleCatalogProseTest, EveryBuiltinRuleSaysWhatItChecksAndWhatToDo) {
  for (const core::BuiltinRuleInfo& rule : core::BuiltinRules()) {
    EXPECT_GT(rule.checks.size(), 20u) << rule.name;
    EXPECT_GT(rule.suggestion.size(), 20u) << rule.name;
  }
}

core::JobRecord JobWithRules() {
  core::JobRecord job;
  job.set_training_job_name("j");
  auto* debug = job.add_debug_rule_configurations();
  debug->set_rule_configuration_name("vanishing");
  debug->set_rule_evaluator_image("builtin");
  (*debug->mutable_rule_parameters())["rule_to_invoke"] = "VanishingGradient";
  (*debug->mutable_rule_parameters())["threshold"] = "0.001";
  auto* status = job.add_debug_rule_evaluation_statuses();
  status->set_rule_configuration_name("vanishing");
  status->set_rule_evaluation_status(v1::RuleEvaluationStatus::IssuesFound);
  status->set_status_details("step 3 (TRAIN step 3): gradient/w mean |x| 1e-05 < threshold 0.001");
  auto* custom = job.add_debug_rule_configurations();
  custom->set_rule_configuration_name("mine");
  custom->set_rule_evaluator_image("example.com/rules:1");
  (*custom->mutable_rule_parameters())["source_s3_uri"] = "s3://b/rule.py";
  auto* profiler = job.add_profiler_rule_configurations();
  profiler->set_rule_configuration_name("report");
  profiler->set_rule_evaluator_image("builtin");
  (*profiler->mutable_rule_parameters())["rule_to_invoke"] = "ProfilerReport";
  return job;
}

TEST(RuleInsightsTest, StatusProseParametersAndFinding) {
  const std::vector<RuleInsight> insights = RuleInsightsOf(JobWithRules());
  ASSERT_EQ(insights.size(), 3u);
  const RuleInsight& v = insights[0];
  EXPECT_EQ(v.rule, "vanishing");
  EXPECT_EQ(v.kind, "debug");
  EXPECT_EQ(v.status, "IssuesFound");
  EXPECT_EQ(v.checks, core::FindBuiltinRule("VanishingGradient")->checks);
  EXPECT_EQ(v.parameters.at("threshold"), "0.001");
  EXPECT_EQ(v.parameters.count("rule_to_invoke"), 0u);
  ASSERT_TRUE(v.found.has_value());
  EXPECT_EQ(v.found->step, 3);
  EXPECT_EQ(v.found->tensor, "gradient/w");
  EXPECT_DOUBLE_EQ(*v.found->value, 1e-5);

  const RuleInsight& custom = insights[1];
  EXPECT_EQ(custom.status, "InProgress");  // No status recorded.
  EXPECT_THAT(custom.checks, HasSubstr("custom rule"));
  EXPECT_EQ(custom.parameters.at("source_s3_uri"), "s3://b/rule.py");
  EXPECT_FALSE(custom.found.has_value());

  const RuleInsight& report = insights[2];
  EXPECT_EQ(report.kind, "profiler");
  // ProfilerReport runs every profiler rule: their defaults, by rule.
  EXPECT_EQ(report.parameters.count("CPUBottleneck.threshold"), 1u);
  EXPECT_EQ(report.parameters.count("StepOutlier.stddev"), 1u);
}

}  // namespace
}  // namespace debugplane::rules_engine::insights
