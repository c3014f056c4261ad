// CreateXgboostReport over real XGBoost trials (tests/data/xgboost/, saved by
// smdebug's XGBoost hook) and synthetic ones (TrialWriter). The report's
// figures are checked against values computed here, independently, from the
// same tensors: AUC by counting ranked pairs (and against XGBoost's own
// validation-auc), confusion-matrix counts by a plain loop, the top features
// by sorting the gain tensors.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "objectstore/local_object_store.h"
#include "rules_engine/catalog/builtin_rules.h"
#include "rules_engine/smdebug/trial_reader.h"
#include "tests/rules_engine/trial_writer.h"

namespace debugplane::rules_engine {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Kind = RuleVerdict::Kind;

const char kFixtures[] = DP_TEST_DATA_DIR "/xgboost";

// A trial read whole, and the rule run over it.
struct ReportRun {
  std::vector<Step> steps;
  RuleVerdict verdict;
  RuleReport report;
  nlohmann::json json;
};

ReportRun RunReport(const std::string& path) {
  ReportRun run;
  absl::StatusOr<std::unique_ptr<Rule>> rule = CreateBuiltinRule("CreateXgboostReport", {});
  EXPECT_TRUE(rule.ok()) << rule.status();
  if (!rule.ok()) return run;
  Rule* r = rule->get();
  TrialReader reader(objectstore::OpenLocalPath(path).value());
  absl::StatusOr<std::vector<Step>> steps = reader.ReadNewSteps(
      [r](const std::string& tensor, const TrialInfo& info) { return r->Wants(tensor, info); });
  EXPECT_TRUE(steps.ok()) << steps.status();
  if (!steps.ok()) return run;
  run.steps = *steps;
  for (const Step& step : run.steps) EXPECT_EQ(r->OnStep(step, reader.info()).kind, Kind::kContinue);
  run.verdict = r->OnTrainingEnd(reader.info());
  run.report = r->RenderReport(RuleReportContext{.training_job_name = "xgb-job",
                                                 .rule_configuration_name = "CreateXgboostReport",
                                                 .generated_at = absl::FromUnixSeconds(1.8e9),
                                                 .final = true});
  run.json = nlohmann::json::parse(run.report.json, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(run.json.is_discarded()) << run.report.json.substr(0, 200);
  return run;
}

const Tensor& Find(const Step& step, const std::string& name) {
  const Tensor* t = step.Find(name);
  EXPECT_NE(t, nullptr) << name;
  static const Tensor kNone;
  return t != nullptr ? *t : kNone;
}

// AUC as the probability that a random positive outranks a random negative
// (ties count half): every pair, no sorting.
double PairwiseAuc(const std::vector<double>& scores, const std::vector<double>& labels) {
  double wins = 0;
  int64_t pairs = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (labels[i] != 1) continue;
    for (size_t j = 0; j < scores.size(); ++j) {
      if (labels[j] != 0) continue;
      ++pairs;
      wins += scores[i] > scores[j] ? 1 : scores[i] == scores[j] ? 0.5 : 0;
    }
  }
  return wins / pairs;
}

// The features of the last step's feature_importance/gain/*, largest first.
std::vector<std::string> TopByGain(const Step& step, size_t n) {
  std::vector<std::pair<double, std::string>> gains;
  for (const Tensor& t : step.tensors) {
    if (absl::StartsWith(t.name, "feature_importance/gain/")) {
      gains.emplace_back(t.values.at(0), t.name.substr(24));
    }
  }
  std::sort(gains.rbegin(), gains.rend());
  std::vector<std::string> top;
  for (size_t i = 0; i < n && i < gains.size(); ++i) top.push_back(gains[i].second);
  return top;
}

std::vector<std::string> TopInJson(const nlohmann::json& features, size_t n) {
  std::vector<std::pair<double, std::string>> sorted;
  for (const auto& [name, value] : features.items()) sorted.emplace_back(value.get<double>(), name);
  std::sort(sorted.rbegin(), sorted.rend());
  std::vector<std::string> top;
  for (size_t i = 0; i < n && i < sorted.size(); ++i) top.push_back(sorted[i].second);
  return top;
}

TEST(XgboostReportTest, BinaryFixtureMatchesIndependentFigures) {
  const ReportRun run = RunReport(absl::StrCat(kFixtures, "/binary"));
  ASSERT_EQ(run.steps.size(), 12u);
  EXPECT_EQ(run.verdict.kind, Kind::kNoIssuesFound) << run.verdict.details;
  EXPECT_THAT(run.verdict.details, HasSubstr("binary classification"));
  const nlohmann::json& j = run.json;
  EXPECT_EQ(j["task"], "binary classification");
  EXPECT_EQ(j["objective"], "binary:logistic");
  EXPECT_EQ(j["hyperparameters"]["eval_metric"], "logloss,auc");
  EXPECT_EQ(j["last_round"], 55);

  const Step& last = run.steps.back();
  const std::vector<double> p = Find(last, "predictions").values.ToVector();
  const std::vector<double> y = Find(last, "labels").values.ToVector();
  ASSERT_EQ(p.size(), 171u);
  ASSERT_EQ(y.size(), p.size());
  // AUC: pairs counted here, and XGBoost's own validation-auc of that round.
  const double auc = j["classification"]["roc"]["auc"].get<double>();
  EXPECT_NEAR(auc, PairwiseAuc(p, y), 1e-12);
  EXPECT_NEAR(auc, Find(last, "validation-auc").values.at(0), 1e-3);
  // Confusion matrix at threshold 0.5.
  int64_t counts[2][2] = {{0, 0}, {0, 0}};
  for (size_t i = 0; i < p.size(); ++i) counts[static_cast<int>(y[i])][p[i] >= 0.5 ? 1 : 0]++;
  const nlohmann::json& cm = j["classification"]["confusion_matrix"];
  for (int t = 0; t < 2; ++t) {
    for (int q = 0; q < 2; ++q) EXPECT_EQ(cm[t][q].get<int64_t>(), counts[t][q]) << t << "," << q;
  }
  const double accuracy = static_cast<double>(counts[0][0] + counts[1][1]) / p.size();
  EXPECT_NEAR(j["classification"]["accuracy"].get<double>(), accuracy, 1e-12);
  EXPECT_NEAR(j["classification"]["micro"]["f1"].get<double>(), accuracy, 1e-12);
  const double precision1 = static_cast<double>(counts[1][1]) / (counts[1][1] + counts[0][1]);
  EXPECT_NEAR(j["classification"]["per_class"][1]["precision"].get<double>(), precision1, 1e-12);
  // Top features by gain.
  EXPECT_EQ(TopInJson(j["feature_importance"]["gain"], 5), TopByGain(last, 5));
  EXPECT_EQ(j["classification"]["accuracy_per_class_over_rounds"].size(), 12u);
  // Every train-*/validation-* metric, every saved round.
  for (const char* metric : {"train-logloss", "train-auc", "validation-logloss", "validation-auc"}) {
    EXPECT_EQ(j["metrics"][metric].size(), 12u) << metric;
  }
  EXPECT_TRUE(j["missing_collections"].empty());
}

TEST(XgboostReportTest, MulticlassFixtureMatchesIndependentFigures) {
  const ReportRun run = RunReport(absl::StrCat(kFixtures, "/multiclass"));
  EXPECT_EQ(run.verdict.kind, Kind::kNoIssuesFound) << run.verdict.details;
  const nlohmann::json& j = run.json;
  EXPECT_EQ(j["task"], "multiclass classification");
  EXPECT_FALSE(j["classification"].contains("roc"));
  const Step& last = run.steps.back();
  const Tensor& predictions = Find(last, "predictions");
  ASSERT_EQ(predictions.shape, (std::vector<int64_t>{54, 3}));
  const std::vector<double> y = Find(last, "labels").values.ToVector();
  const std::vector<double> all_rows = predictions.values.ToVector();
  std::vector<std::vector<int64_t>> counts(3, std::vector<int64_t>(3, 0));
  for (size_t i = 0; i < y.size(); ++i) {
    const double* row = &all_rows[3 * i];
    int best = 0;
    for (int c = 1; c < 3; ++c) best = row[c] > row[best] ? c : best;
    counts[static_cast<int>(y[i])][best]++;
  }
  EXPECT_EQ(j["classification"]["confusion_matrix"].get<std::vector<std::vector<int64_t>>>(),
            counts);
  // Macro F1: the mean of the per-class F1s, from the counts here.
  double macro_f1 = 0;
  for (int c = 0; c < 3; ++c) {
    const double tp = counts[c][c];
    const double fp = counts[0][c] + counts[1][c] + counts[2][c] - tp;
    const double fn = counts[c][0] + counts[c][1] + counts[c][2] - tp;
    macro_f1 += tp == 0 ? 0 : 2 * tp / (2 * tp + fp + fn) / 3;
  }
  EXPECT_NEAR(j["classification"]["macro"]["f1"].get<double>(), macro_f1, 1e-12);
  EXPECT_EQ(TopInJson(j["feature_importance"]["gain"], 3), TopByGain(last, 3));
  EXPECT_EQ(j["label_distribution"]["counts"].size(), 3u);
  EXPECT_FALSE(j["average_shap"].empty());
}

TEST(XgboostReportTest, PageIsSelfContainedAndHasTheSections) {
  const ReportRun run = RunReport(absl::StrCat(kFixtures, "/binary"));
  const std::string& html = run.report.html;
  // Kept for a person to open (the path is printed).
  const std::string page = testing::FreshTempDir("xgb_page") + "/xgboost_report.html";
  EXPECT_TRUE(testing::WriteFile(page, html));
  std::printf("binary fixture report: %s\n", page.c_str());
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, HasSubstr("Content-Security-Policy"));
  EXPECT_THAT(html, Not(HasSubstr("href=\"http")));  // Nothing fetched.
  EXPECT_THAT(html, Not(HasSubstr("src=\"http")));
  for (const char* id : {"id=\"hints\"", "id=\"metrics\"", "id=\"label-distribution\"",
                         "id=\"confusion-matrix\"", "id=\"class-accuracy\"", "id=\"roc\"",
                         "id=\"feature-importance\"", "id=\"average-shap\"", "id=\"importance-gain\"",
                         "id=\"importance-total_cover\""}) {
    EXPECT_THAT(html, HasSubstr(id));
  }
}

// Synthetic trials: what the fixtures do not have.
testing::TensorSpec Scalar(const std::string& name, double v) { return {name, {1}, {v}}; }

TEST(XgboostReportTest, RegressionResidualsAndErrorPerLabelBin) {
  const std::string dir = testing::FreshTempDir("xgb_regression");
  testing::TrialWriter writer(dir);
  std::vector<double> labels, predictions;
  for (int i = 0; i < 100; ++i) {
    labels.push_back(i);                       // 0..99: 10 rows per label bin.
    predictions.push_back(i + (i % 7) - 3.0);  // Residuals -3..3.
  }
  for (int round = 0; round < 3; ++round) {
    writer.AddStep(round, Mode::kGlobal, round,
                   {{"hyperparameters/objective", {1}, {}, {"reg:squarederror"}},
                    Scalar("train-rmse", 10.0 - round), Scalar("validation-rmse", 11.0 - round),
                    {"predictions", {100}, predictions}, {"labels", {100}, labels},
                    Scalar("feature_importance/gain/f0", 3), Scalar("feature_importance/gain/f1", 5)});
  }
  writer.EndTraining();
  const ReportRun run = RunReport(dir);
  EXPECT_EQ(run.verdict.kind, Kind::kNoIssuesFound) << run.verdict.details;
  const nlohmann::json& r = run.json["regression"];
  EXPECT_EQ(run.json["task"], "regression");
  int64_t total = 0;
  for (const auto& c : r["residual_histogram"]["counts"]) total += c.get<int64_t>();
  EXPECT_EQ(total, 100);
  EXPECT_EQ(r["residual_histogram"]["lo"].get<double>(), -3);
  EXPECT_EQ(r["residual_histogram"]["hi"].get<double>(), 3);
  const nlohmann::json& bins = r["absolute_error_per_label_bin"];
  ASSERT_EQ(bins["mean_absolute_error"].size(), 10u);
  for (int b = 0; b < 10; ++b) {
    double sum = 0;
    for (int i = 10 * b; i < 10 * b + 10; ++i) sum += std::fabs(labels[i] - predictions[i]);
    EXPECT_NEAR(bins["mean_absolute_error"][b].get<double>(), sum / 10, 1e-9) << "bin " << b;
    EXPECT_EQ(bins["rows"][b], 10);
  }
  EXPECT_THAT(run.report.html, HasSubstr("id=\"error-per-label-bin\""));
}

TEST(XgboostReportTest, OverfittingAndUnderfittingHintsNameTheCurves) {
  const std::string dir = testing::FreshTempDir("xgb_hints");
  testing::TrialWriter writer(dir);
  for (int round = 0; round <= 40; round += 2) {
    // Validation best at round 10, then rising for 30 rounds; training keeps falling.
    const double validation = 0.5 + 0.01 * std::fabs(round - 10.0);
    writer.AddStep(round, Mode::kGlobal, round,
                   {Scalar("train-logloss", 1.0 / (1 + round)), Scalar("validation-logloss", validation),
                    {"predictions", {4}, {0.1, 0.9, 0.8, 0.3}}, {"labels", {4}, {0, 1, 1, 0}},
                    Scalar("feature_importance/weight/f0", 1)});
  }
  writer.EndTraining();
  const ReportRun run = RunReport(dir);
  ASSERT_GE(run.json["hints"].size(), 1u);
  const std::string text = run.json["hints"][0]["text"];
  EXPECT_EQ(run.json["hints"][0]["kind"], "overfitting");
  EXPECT_THAT(text, HasSubstr("validation-logloss was best at round 10"));
  EXPECT_THAT(text, HasSubstr("train-logloss kept improving"));
  EXPECT_THAT(run.verdict.details, HasSubstr("hints: overfitting"));
  // Training still improving over its last 10 rounds: underfitting too.
  bool underfitting = false;
  for (const auto& hint : run.json["hints"]) underfitting |= hint["kind"] == "underfitting";
  EXPECT_FALSE(underfitting) << "validation does not improve, so no underfitting hint";
}

TEST(XgboostReportTest, MissingCollectionIsAnErrorSayingWhatToAdd) {
  const std::string dir = testing::FreshTempDir("xgb_missing");
  testing::TrialWriter writer(dir);
  writer.AddStep(0, Mode::kGlobal, 0,
                 {Scalar("train-logloss", 0.5), {"predictions", {2}, {0.2, 0.7}},
                  {"labels", {2}, {0, 1}}});
  writer.EndTraining();
  const ReportRun run = RunReport(dir);
  EXPECT_EQ(run.verdict.kind, Kind::kError);
  EXPECT_THAT(run.verdict.details, HasSubstr("collection 'feature_importance' saved no tensors"));
  EXPECT_THAT(run.verdict.details, HasSubstr("{\"CollectionName\": \"feature_importance\"}"));
  EXPECT_THAT(run.verdict.details, HasSubstr("CollectionConfigurations"));
  EXPECT_THAT(run.report.html, HasSubstr("collection &#39;feature_importance&#39; saved no"));
}

TEST(XgboostReportTest, TrialTextIsEscapedAndTaskComesFromShape) {
  const std::string dir = testing::FreshTempDir("xgb_escape");
  testing::TrialWriter writer(dir);
  writer.AddStep(0, Mode::kGlobal, 0,
                 {{"hyperparameters/note", {1}, {}, {"<script>alert(1)</script>"}},
                  Scalar("train-mlogloss", 1), {"predictions", {2, 3}, {0.7, 0.2, 0.1, 0.1, 0.1, 0.8}},
                  {"labels", {2}, {0, 2}}, Scalar("feature_importance/gain/<img src=x>", 2)});
  writer.EndTraining();
  const ReportRun run = RunReport(dir);
  EXPECT_EQ(run.json["task"], "multiclass classification");
  EXPECT_EQ(run.json["classification"]["accuracy"], 1.0);
  EXPECT_THAT(run.report.html, Not(HasSubstr("<script")));
  EXPECT_THAT(run.report.html, Not(HasSubstr("<img")));
  EXPECT_THAT(run.report.html, HasSubstr("&lt;script&gt;"));
}

}  // namespace
}  // namespace debugplane::rules_engine
