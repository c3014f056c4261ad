#include "rules_engine/xgboost_report/xgboost_report_rule.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "rules_engine/xgboost_report/xgboost_report_render.h"
#include "rules_engine/xgboost_report/xgboost_trial_data.h"

namespace debugplane::rules_engine {
namespace {

class CreateXgboostReport : public Rule {
 public:
  std::string name() const override { return "CreateXgboostReport"; }

  bool Wants(const std::string& tensor, const TrialInfo& info) const override {
    if (!XgboostCollectionOf(tensor).empty()) return true;
    for (const char* collection : kXgboostCollections) {
      if (info.InCollection(collection, tensor)) return true;
    }
    return false;
  }

  std::vector<std::string> RequiredCollections() const override {
    return XgboostReportRequiredCollections();
  }

  RuleVerdict OnStep(const Step& step, const TrialInfo& info) override {
    data_.AddStep(step, info);
    return RuleVerdict::Continue();
  }

  RuleVerdict OnTrainingEnd(const TrialInfo&) override {
    const std::vector<std::string> missing = Missing();
    if (!missing.empty()) {
      return RuleVerdict::Error(absl::StrCat(absl::StrJoin(missing, "; "),
                                             "; the report was written without it"));
    }
    const XgboostAnalysis analysis = Analyze(data_);
    std::string details = absl::StrCat("report written: ", TaskName(analysis.task), ", ",
                                       data_.rounds_seen(), " saved rounds up to round ",
                                       data_.last_round());
    if (analysis.has_roc) absl::StrAppend(&details, absl::StrFormat("; validation AUC %.4f", analysis.auc));
    if (!analysis.confusion.empty()) {
      absl::StrAppend(&details, absl::StrFormat("; accuracy %.1f%%", analysis.accuracy * 100));
    }
    if (!analysis.hints.empty()) {
      std::vector<std::string> kinds;
      for (const CurveHint& hint : analysis.hints) kinds.push_back(hint.kind);
      absl::StrAppend(&details, "; hints: ", absl::StrJoin(kinds, ", "));
    }
    return RuleVerdict::NoIssues(std::move(details));
  }

  std::string ReportFileStem() const override { return kXgboostReportFileStem; }

  RuleReport RenderReport(const RuleReportContext& context) const override {
    const XgboostAnalysis analysis = Analyze(data_);
    // While training runs, a collection may simply not have arrived yet.
    XgboostReportContext page{.rule = context};
    if (context.final) page.missing_collections = Missing();
    return {.html = RenderXgboostReportHtml(data_, analysis, page),
            .json = RenderXgboostReportJson(data_, analysis, page)};
  }

 private:
  // One line per required collection that saved nothing.
  std::vector<std::string> Missing() const {
    std::vector<std::string> missing;
    for (const std::string& collection : XgboostReportRequiredCollections()) {
      if (data_.Saw(collection)) continue;
      missing.push_back(absl::StrCat(
          "collection '", collection, "' saved no tensors (", data_.rounds_seen(),
          " steps read); add {\"CollectionName\": \"", collection,
          "\"} to the job's DebugHookConfig.CollectionConfigurations"));
    }
    return missing;
  }

  XgboostTrialData data_;
};

}  // namespace

std::vector<std::string> XgboostReportRequiredCollections() {
  return {"metrics", "predictions", "labels", "feature_importance"};
}

absl::StatusOr<std::unique_ptr<Rule>> MakeCreateXgboostReport(RuleParameterReader& params,
                                                             const RuleContext&) {
  if (absl::Status s = params.status(); !s.ok()) return s;
  return std::make_unique<CreateXgboostReport>();
}

}  // namespace debugplane::rules_engine
