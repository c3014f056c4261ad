// The rules engine's catalog agrees with core's: core/jobs/rule_catalog.h is
// the one table of the built-in rules, and the engine implements its rules.

#include <algorithm>
#include <string>
#include <vector>

#include "core/jobs/rule_catalog.h"
#include "core/jobs/validation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rules_engine/catalog/builtin_rules.h"
#include "rules_engine/profiler_rules/profiler_report_rules.h"
#include "rules_engine/profiler_rules/profiler_rules.h"
#include "rules_engine/scheduling/validation_hooks.h"

namespace debugplane::rules_engine {
namespace {

using ::testing::HasSubstr;

TEST(BuiltinRulesCatalogTest, EveryTensorRuleIsADebuggingRuleOfTheCatalog) {
  for (const std::string& name : BuiltinTensorRuleNames()) {
    const core::BuiltinRuleInfo* info = core::FindBuiltinRule(name);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_EQ(info->kind, core::RuleKind::kDebug) << name;
  }
}

TEST(BuiltinRulesCatalogTest, ProfilerRulesAreTheCatalogsProfilerRules) {
  for (const core::BuiltinRuleInfo& rule : core::BuiltinRules()) {
    EXPECT_EQ(IsProfilerRuleName(std::string(rule.name)), rule.kind == core::RuleKind::kProfiler)
        << rule.name;
  }
  for (const std::string& name : ProfilerRuleNames()) {
    const core::BuiltinRuleInfo* info = core::FindBuiltinRule(name);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_EQ(info->kind, core::RuleKind::kProfiler) << name;
  }
}

TEST(BuiltinRulesCatalogTest, EveryCatalogRuleIsKnownToTheEngine) {
  for (const core::BuiltinRuleInfo& rule : core::BuiltinRules()) {
    if (rule.kind != core::RuleKind::kDebug) continue;
    // Known: created, refused for its parameters, or not evaluated here;
    // never NOT_FOUND.
    EXPECT_NE(CreateBuiltinRule(std::string(rule.name), {}).status().code(),
              absl::StatusCode::kNotFound)
        << rule.name;
  }
  EXPECT_EQ(CreateBuiltinRule("DLProfilerReport", {}).status().code(),
            absl::StatusCode::kNotFound);
}

// Where the two catalogs disagreed (the engine listed CreateXgboostReport
// with the profiler rules and report generators), core's word holds: it is
// a debugging rule, configured in DebugRuleConfigurations, where this engine
// evaluates it (it writes the XGBoost training report).
TEST(BuiltinRulesCatalogTest, CreateXgboostReportIsADebuggingRule) {
  const core::BuiltinRuleInfo* info = core::FindBuiltinRule("CreateXgboostReport");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->kind, core::RuleKind::kDebug);
  EXPECT_FALSE(IsProfilerRuleName("CreateXgboostReport"));
  absl::StatusOr<std::unique_ptr<Rule>> created = CreateBuiltinRule("CreateXgboostReport", {});
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ((*created)->ReportFileStem(), "xgboost_report");
  EXPECT_TRUE(ValidateBuiltinRuleParameters("CreateXgboostReport", {}).ok());
  const absl::Status unknown = CreateBuiltinRule("CreateXgboostReport", {{"depth", "3"}}).status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.message(), HasSubstr("depth"));

  // In the wrong list, validation says where it belongs.
  core::ValidationOptions options;
  InstallRuleValidation(&options);
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name("xgboost");
  request.set_role_arn("arn:aws:iam::111122223333:role/Role");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
  auto* rule = request.add_profiler_rule_configurations();
  rule->set_rule_configuration_name("report");
  rule->set_rule_evaluator_image("builtin");
  (*rule->mutable_rule_parameters())["rule_to_invoke"] = "CreateXgboostReport";
  const absl::Status status = core::ValidateCreateTrainingJobRequest(request, options);
  EXPECT_THAT(status.message(), HasSubstr("'CreateXgboostReport' is a built-in debugging rule; "
                                          "configure it in DebugRuleConfigurations"));
}

}  // namespace
}  // namespace debugplane::rules_engine
