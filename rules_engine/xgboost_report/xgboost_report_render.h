// Rendering of the XGBoost training report (CreateXgboostReport) as SageMaker
// Debugger's xgboost_report.html shows it, made the way the profiling report
// is: one self-contained page (inline CSS and SVG charts, no script, a
// Content-Security-Policy that forbids every fetch, so it reads offline), every
// text from the trial escaped; and a JSON summary of the same figures.

#ifndef DEBUGPLANE_RULES_ENGINE_XGBOOST_REPORT_XGBOOST_REPORT_RENDER_H_
#define DEBUGPLANE_RULES_ENGINE_XGBOOST_REPORT_XGBOOST_REPORT_RENDER_H_

#include <string>
#include <vector>

#include "rules_engine/rule/rule.h"
#include "rules_engine/xgboost_report/xgboost_trial_data.h"

namespace debugplane::rules_engine {

// What the page says about the run besides the figures.
struct XgboostReportContext {
  RuleReportContext rule;
  // Required collections that saved nothing, with what to add.
  std::vector<std::string> missing_collections;
};

// The page: header (job, rule, generated at, live or final, task,
// objective, rounds), the curve hints, hyperparameters, label
// distribution, metrics per round, feature importance by type and average
// SHAP, then the classification (confusion matrix, precision/recall/F1,
// accuracy per class over rounds, ROC for binary) or regression (residuals,
// absolute error per label bin) sections, and what was left out.
std::string RenderXgboostReportHtml(const XgboostTrialData& data, const XgboostAnalysis& analysis,
                                    const XgboostReportContext& context);

// The same figures as JSON (an object; NaN and infinities as null). Keys:
// training_job_name, rule_configuration_name, generated_at, final, task,
// objective, rounds_seen, last_round, hyperparameters, label_distribution,
// metrics, hints, feature_importance, average_shap, classification or
// regression, missing_collections, notes.
std::string RenderXgboostReportJson(const XgboostTrialData& data, const XgboostAnalysis& analysis,
                                    const XgboostReportContext& context);

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_XGBOOST_REPORT_XGBOOST_REPORT_RENDER_H_
