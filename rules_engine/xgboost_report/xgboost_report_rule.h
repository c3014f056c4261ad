// CreateXgboostReport: the built-in debugging rule that writes SageMaker
// Debugger's XGBoost training report (xgboost_report.html and its JSON) from
// the collections smdebug's XGBoost hook saves (metrics, predictions, labels,
// feature_importance, average_shap, hyperparameters).
//
// It judges nothing: InProgress while training runs (the scheduler renders
// the report as rounds arrive, throttled), NoIssuesFound once training ended
// with the report complete, or Error naming each required collection that
// saved nothing and what to add to CollectionConfigurations (the report is
// still written with what there is).

#ifndef DEBUGPLANE_RULES_ENGINE_XGBOOST_REPORT_XGBOOST_REPORT_RULE_H_
#define DEBUGPLANE_RULES_ENGINE_XGBOOST_REPORT_XGBOOST_REPORT_RULE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rules_engine/rule/rule.h"
#include "rules_engine/rule/rule_parameters.h"

namespace debugplane::rules_engine {

// The report's file stem: <report_dir>/<job>/<rule>/xgboost_report.{html,json}.
inline constexpr char kXgboostReportFileStem[] = "xgboost_report";

// The collections without which the report cannot be complete (an Error
// when training ends without them); average_shap and hyperparameters are
// optional (the report says when they are missing).
std::vector<std::string> XgboostReportRequiredCollections();

// Makes the rule. It takes no parameters (an unknown one is
// INVALID_ARGUMENT naming it).
absl::StatusOr<std::unique_ptr<Rule>> MakeCreateXgboostReport(RuleParameterReader& params,
                                                             const RuleContext& context);

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_XGBOOST_REPORT_XGBOOST_REPORT_RULE_H_
