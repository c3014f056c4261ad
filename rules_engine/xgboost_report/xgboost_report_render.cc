#include "rules_engine/xgboost_report/xgboost_report_render.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "rules_engine/report/report_text.h"
#include "rules_engine/report/svg_charts.h"

namespace debugplane::rules_engine {
namespace {

using profiler_report_internal::Axis;
using profiler_report_internal::EscapeHtml;
using profiler_report_internal::FormatRfc3339;
using profiler_report_internal::kPalette;
using profiler_report_internal::kPaletteSize;
using profiler_report_internal::NiceStep;
using profiler_report_internal::SvgNumber;

constexpr double kWidth = 960;
constexpr double kLeft = 64, kRight = 24, kTop = 16, kBottom = 44;
// Bars shown per importance chart (the table has them all).
constexpr size_t kTopFeatures = 20;

const char kCss[] = R"css(
*{box-sizing:border-box}
body{margin:0;background:#f5f7fa;color:#1f2933;font:15px/1.5 system-ui,-apple-system,"Segoe UI",
Roboto,"Helvetica Neue",Arial,"DejaVu Sans",sans-serif}
main{max-width:1100px;margin:0 auto;padding:24px 20px 48px}
header.top{background:#1f2933;color:#fff;padding:22px 20px}
header.top .inner{max-width:1100px;margin:0 auto}
header.top h1{margin:0 0 4px;font-size:26px;font-weight:650;word-break:break-all}
header.top .meta{color:#cbd2d9;font-size:14px}header.top .meta b{color:#fff}
.mode{display:inline-block;margin-left:8px;padding:2px 10px;border-radius:999px;font-size:13px;
font-weight:600}.mode.live{background:#fff3cd;color:#7a5b00}.mode.final{background:#d1f2dc;
color:#14532d}
.card{background:#fff;border:1px solid #e4e7eb;border-radius:12px;padding:18px 20px;
margin-bottom:20px}
h2{margin:0 0 4px;font-size:19px}h3{font-size:15px;margin:14px 0 6px}
.sub{margin:0 0 10px;color:#616e7c;font-size:13.5px}
table{border-collapse:collapse;font-size:14px;margin:6px 0}
th{text-align:left;color:#616e7c;font-weight:600;border-bottom:2px solid #e4e7eb;padding:6px 10px}
td{border-bottom:1px solid #e4e7eb;padding:6px 10px}td.num,th.num{text-align:right;
font-variant-numeric:tabular-nums}
td.cm{text-align:center;min-width:56px;font-variant-numeric:tabular-nums}
.hint{border-left:4px solid #c62828;background:#fdecea;padding:8px 12px;margin:8px 0;
border-radius:4px}.hint.underfitting{border-color:#b7791f;background:#fff8e1}
.ok{border-left:4px solid #2e7d32;background:#e8f5e9;padding:8px 12px;border-radius:4px}
.missing{border-left:4px solid #8e24aa;background:#f3e5f5;padding:8px 12px;margin:8px 0;
border-radius:4px}
svg.chart{width:100%;height:auto;display:block}
svg.chart text{font-size:12px;fill:#616e7c}svg.chart .grid line{stroke:#e4e7eb}
svg.chart .axis{stroke:#9aa5b1}
.legend{display:flex;flex-wrap:wrap;gap:14px;font-size:13px;color:#616e7c;margin-top:4px}
.swatch{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:5px;
vertical-align:-1px}
.empty{color:#616e7c;font-style:italic}
ul.notes{color:#616e7c;font-size:13.5px}
)css";

std::string Num(double v) {
  if (!std::isfinite(v)) return "–";
  return absl::StrFormat("%.4g", v);
}

std::string Percent(double v) { return absl::StrFormat("%.1f%%", v * 100); }

std::string Color(size_t i) { return kPalette[i % kPaletteSize]; }

struct Series {
  std::string label;
  std::vector<std::pair<double, double>> points;
};

std::string SvgOpen(const std::string& id, double height, const std::string& label) {
  return absl::StrCat("<svg class=\"chart\" id=\"", id, "\" viewBox=\"0 0 ", SvgNumber(kWidth), " ",
                      SvgNumber(height), "\" role=\"img\" aria-label=\"", EscapeHtml(label),
                      "\" xmlns=\"http://www.w3.org/2000/svg\">\n");
}

std::string Legend(const std::vector<Series>& series) {
  std::string s = "<div class=\"legend\">";
  for (size_t i = 0; i < series.size(); ++i) {
    absl::StrAppend(&s, "<span><span class=\"swatch\" style=\"background:", Color(i), "\"></span>",
                    EscapeHtml(series[i].label), "</span>");
  }
  return s + "</div>\n";
}

// Horizontal grid lines with tick labels for the y axis `y` over the plot.
std::string YGrid(const Axis& x, const Axis& y) {
  const double step = NiceStep(y.hi - y.lo, 5);
  std::string s = "<g class=\"grid\">";
  if (!(step > 0)) return s + "</g>";
  for (double v = std::ceil(y.lo / step) * step; v <= y.hi + step * 1e-9; v += step) {
    absl::StrAppend(&s, "<line x1=\"", SvgNumber(x.px0), "\" y1=\"", SvgNumber(y(v)), "\" x2=\"",
                    SvgNumber(x.px1), "\" y2=\"", SvgNumber(y(v)), "\"/><text x=\"",
                    SvgNumber(x.px0 - 6), "\" y=\"", SvgNumber(y(v) + 4), "\" text-anchor=\"end\">",
                    EscapeHtml(Num(std::fabs(v) < step * 1e-9 ? 0 : v)), "</text>");
  }
  return s + "</g>";
}

std::string XTicks(const Axis& x, double py) {
  const double step = NiceStep(x.hi - x.lo, 8);
  std::string s = absl::StrCat("<line class=\"axis\" x1=\"", SvgNumber(x.px0), "\" y1=\"",
                               SvgNumber(py), "\" x2=\"", SvgNumber(x.px1), "\" y2=\"",
                               SvgNumber(py), "\"/>");
  if (!(step > 0)) return s;
  for (double v = std::ceil(x.lo / step) * step; v <= x.hi + step * 1e-9; v += step) {
    absl::StrAppend(&s, "<text x=\"", SvgNumber(x(v)), "\" y=\"", SvgNumber(py + 16),
                    "\" text-anchor=\"middle\">", EscapeHtml(Num(v)), "</text>");
  }
  return s;
}

// Lines of (x, y) points; `fixed` sets the axes to [0,1] x [0,1] (ROC,
// accuracies).
std::string LineChart(const std::string& id, const std::string& label, std::vector<Series> series,
                      const std::string& x_title, bool unit_square = false, double height = 280) {
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const Series& s : series) {
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x);
      y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y);
    }
  }
  if (x_lo > x_hi) return "<p class=\"empty\">No values yet.</p>\n";
  if (unit_square) x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  if (y_hi <= y_lo) y_hi = y_lo + 1;
  const double pad = (y_hi - y_lo) * 0.05;
  const Axis x{x_lo, x_hi, kLeft, kWidth - kRight};
  const Axis y{unit_square ? 0 : y_lo - pad, unit_square ? 1 : y_hi + pad, height - kBottom, kTop};
  std::string s = SvgOpen(id, height, label) + YGrid(x, y) + XTicks(x, height - kBottom);
  absl::StrAppend(&s, "<text x=\"", SvgNumber(x.px1), "\" y=\"", SvgNumber(height - 6),
                  "\" text-anchor=\"end\">", EscapeHtml(x_title), "</text>");
  if (unit_square) {
    absl::StrAppend(&s, "<line x1=\"", SvgNumber(x(0)), "\" y1=\"", SvgNumber(y(0)), "\" x2=\"",
                    SvgNumber(x(1)), "\" y2=\"", SvgNumber(y(1)),
                    "\" stroke=\"#bbb\" stroke-dasharray=\"4 4\"/>");
  }
  for (size_t i = 0; i < series.size(); ++i) {
    std::string points;
    for (const auto& [px, py] : series[i].points) {
      if (!std::isfinite(px) || !std::isfinite(py)) continue;
      absl::StrAppend(&points, points.empty() ? "" : " ", SvgNumber(x(px)), ",", SvgNumber(y(py)));
    }
    absl::StrAppend(&s, "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"", Color(i),
                    "\" points=\"", points, "\"><title>", EscapeHtml(series[i].label),
                    "</title></polyline>\n");
  }
  return s + "</svg>\n" + Legend(series);
}

// Vertical bars, one per label, from zero.
std::string BarChart(const std::string& id, const std::string& label,
                     const std::vector<std::string>& labels, const std::vector<double>& values,
                     const std::string& x_title) {
  const double height = 260;
  double lo = 0, hi = 0;
  for (double v : values) {
    if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  if (hi <= lo) hi = lo + 1;
  const Axis x{0, static_cast<double>(values.size()), kLeft, kWidth - kRight};
  const Axis y{lo, hi * 1.05, height - kBottom, kTop};
  std::string s = SvgOpen(id, height, label) + YGrid(x, y);
  const double slot = (x.px1 - x.px0) / std::max<size_t>(values.size(), 1);
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = std::isfinite(values[i]) ? values[i] : 0;
    const double top = y(std::max(v, 0.0)), bottom = y(std::min(v, 0.0));
    absl::StrAppend(&s, "<rect x=\"", SvgNumber(x(i) + slot * 0.1), "\" y=\"", SvgNumber(top),
                    "\" width=\"", SvgNumber(slot * 0.8), "\" height=\"",
                    SvgNumber(std::max(bottom - top, 0.5)), "\" fill=\"", Color(0), "\"><title>",
                    EscapeHtml(absl::StrCat(labels[i], ": ", Num(values[i]))), "</title></rect>");
    absl::StrAppend(&s, "<text x=\"", SvgNumber(x(i) + slot / 2), "\" y=\"",
                    SvgNumber(height - kBottom + 16), "\" text-anchor=\"middle\">",
                    EscapeHtml(labels[i]), "</text>");
  }
  absl::StrAppend(&s, "<line class=\"axis\" x1=\"", SvgNumber(x.px0), "\" y1=\"", SvgNumber(y(0)),
                  "\" x2=\"", SvgNumber(x.px1), "\" y2=\"", SvgNumber(y(0)), "\"/><text x=\"",
                  SvgNumber(x.px1), "\" y=\"", SvgNumber(height - 6), "\" text-anchor=\"end\">",
                  EscapeHtml(x_title), "</text></svg>\n");
  return s;
}

// Horizontal bars (signed values allowed), one row per label.
std::string HBarChart(const std::string& id, const std::string& label,
                      const std::vector<std::pair<std::string, double>>& rows) {
  const double row_height = 20, left = 140;
  const double height = kTop + kBottom / 2 + row_height * rows.size();
  double lo = 0, hi = 0;
  for (const auto& [name, v] : rows) lo = std::min(lo, v), hi = std::max(hi, v);
  if (hi <= lo) hi = lo + 1;
  const Axis x{lo, hi, left, kWidth - 90};
  std::string s = SvgOpen(id, height, label);
  for (size_t i = 0; i < rows.size(); ++i) {
    const double py = kTop + i * row_height;
    const double a = x(std::min(rows[i].second, 0.0)), b = x(std::max(rows[i].second, 0.0));
    absl::StrAppend(&s, "<text x=\"", SvgNumber(left - 8), "\" y=\"", SvgNumber(py + 14),
                    "\" text-anchor=\"end\">", EscapeHtml(rows[i].first), "</text><rect x=\"",
                    SvgNumber(a), "\" y=\"", SvgNumber(py + 3), "\" width=\"",
                    SvgNumber(std::max(b - a, 0.5)), "\" height=\"", SvgNumber(row_height - 6),
                    "\" fill=\"", Color(rows[i].second < 0 ? 3 : 0), "\"/><text x=\"",
                    SvgNumber(b + 6), "\" y=\"", SvgNumber(py + 14), "\">",
                    EscapeHtml(Num(rows[i].second)), "</text>");
  }
  return s + "</svg>\n";
}

std::string Card(const std::string& id, const std::string& title, const std::string& sub_html,
                 const std::string& body) {
  return absl::StrCat("<section class=\"card\" id=\"", id, "\"><h2>", EscapeHtml(title), "</h2>",
                      sub_html.empty() ? "" : absl::StrCat("<p class=\"sub\">", sub_html, "</p>"),
                      body, "</section>\n");
}

std::string Header(const XgboostTrialData& data, const XgboostAnalysis& analysis,
                   const XgboostReportContext& context) {
  const RuleReportContext& rule = context.rule;
  return absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'; img-src data:\">\n<link rel=\"icon\" href=\"data:,\">\n<title>",
      EscapeHtml(rule.training_job_name), " — XGBoost training report</title>\n<style>", kCss,
      "</style></head>\n<body>\n<header class=\"top\"><div class=\"inner\"><div class=\"meta\">",
      EscapeHtml(rule.rule_configuration_name.empty() ? "CreateXgboostReport"
                                                      : rule.rule_configuration_name),
      " · XGBoost training report</div><h1>", EscapeHtml(rule.training_job_name), "</h1>",
      "<div class=\"meta\">Generated <b>", EscapeHtml(FormatRfc3339(rule.generated_at)), "</b>",
      rule.final ? "<span class=\"mode final\">final</span>"
                 : "<span class=\"mode live\">live: training in progress</span>",
      "</div><div class=\"meta\">Task <b id=\"task\">", EscapeHtml(TaskName(analysis.task)),
      "</b> · objective <b>", EscapeHtml(analysis.objective.empty() ? "not saved" : analysis.objective),
      "</b> · <b>", data.rounds_seen(), "</b> saved rounds, last round <b>", data.last_round(),
      "</b></div></div></header>\n<main>\n");
}

std::string HintsCard(const XgboostAnalysis& analysis, const XgboostReportContext& context) {
  std::string body;
  for (const std::string& missing : context.missing_collections) {
    absl::StrAppend(&body, "<div class=\"missing\">", EscapeHtml(missing), "</div>");
  }
  for (const CurveHint& hint : analysis.hints) {
    absl::StrAppend(&body, "<div class=\"hint ", hint.kind, "\"><b>", EscapeHtml(hint.kind),
                    ":</b> ", EscapeHtml(hint.text), "</div>");
  }
  if (analysis.hints.empty()) {
    body += "<div class=\"ok\">No overfitting or underfitting signs by these rules of thumb: a "
            "validation metric not improving for 10 rounds while the training one improves "
            "(overfitting); a training metric still improving by more than 1% over the last 10 "
            "rounds (underfitting).</div>";
  }
  return Card("hints", "Overfitting and underfitting", "", body);
}

std::string HyperparametersCard(const XgboostTrialData& data) {
  if (data.hyperparameters().empty()) {
    return Card("hyperparameters", "Hyperparameters", "",
                "<p class=\"empty\">Not saved: add the collection hyperparameters.</p>");
  }
  std::string rows;
  for (const auto& [name, value] : data.hyperparameters()) {
    absl::StrAppend(&rows, "<tr><td>", EscapeHtml(name), "</td><td>", EscapeHtml(value),
                    "</td></tr>");
  }
  return Card("hyperparameters", "Hyperparameters", "",
              absl::StrCat("<table><tr><th>name</th><th>value</th></tr>", rows, "</table>"));
}

std::string LabelsCard(const XgboostAnalysis& analysis) {
  std::vector<std::string> labels;
  std::vector<double> counts(analysis.label_counts.begin(), analysis.label_counts.end());
  const bool regression = analysis.task == XgboostTask::kRegression;
  const double width = (analysis.label_hi - analysis.label_lo) / 10;
  for (size_t i = 0; i < counts.size(); ++i) {
    labels.push_back(regression ? Num(analysis.label_lo + width * (i + 0.5))
                                : absl::StrCat("class ", i));
  }
  const std::string body =
      counts.empty() ? "<p class=\"empty\">No labels yet.</p>"
                     : BarChart("label-distribution-chart", "label distribution", labels, counts,
                                regression ? "label (bin centre)" : "true class");
  return Card("label-distribution", "Distribution of true labels",
              "The validation set's labels (collection labels).", body);
}

std::string MetricsCard(const XgboostTrialData& data) {
  // One chart per metric: its train- and validation- curves together.
  std::map<std::string, std::vector<Series>> by_metric;
  for (const auto& [name, points] : data.metrics()) {
    const size_t dash = name.find('-');
    Series s{name, {}};
    for (const auto& [round, v] : points) s.points.emplace_back(static_cast<double>(round), v);
    by_metric[dash == std::string::npos ? name : name.substr(dash + 1)].push_back(std::move(s));
  }
  std::string body;
  int n = 0;
  for (auto& [metric, series] : by_metric) {
    absl::StrAppend(&body, "<h3>", EscapeHtml(metric), "</h3>",
                    LineChart(absl::StrCat("metric-chart-", n++), metric, std::move(series),
                              "boosting round"));
  }
  if (body.empty()) body = "<p class=\"empty\">No metrics yet (collection metrics).</p>";
  return Card("metrics", "Loss and metrics per boosting round",
              "Every train-* and validation-* metric the hook saved.", body);
}

std::string ImportanceCard(const XgboostTrialData& data) {
  std::string body;
  for (const char* type : kImportanceTypes) {
    auto it = data.importance().find(type);
    if (it == data.importance().end() || it->second.empty()) continue;
    std::vector<std::pair<std::string, double>> rows(it->second.begin(), it->second.end());
    std::stable_sort(rows.begin(), rows.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    if (rows.size() > kTopFeatures) rows.resize(kTopFeatures);
    absl::StrAppend(&body, "<h3>", type, "</h3>",
                    HBarChart(absl::StrCat("importance-", type), type, rows));
  }
  if (body.empty()) body = "<p class=\"empty\">No feature importance yet.</p>";
  std::string shap;
  if (!data.average_shap().empty()) {
    std::vector<std::pair<std::string, double>> rows(data.average_shap().begin(),
                                                     data.average_shap().end());
    std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
      return std::fabs(a.second) > std::fabs(b.second);
    });
    if (rows.size() > kTopFeatures) rows.resize(kTopFeatures);
    shap = HBarChart("average-shap-chart", "average SHAP", rows);
  } else {
    shap = "<p class=\"empty\">Not saved: add the collection average_shap.</p>";
  }
  return Card("feature-importance", "Feature importance",
              "Per importance type at the last saved round, top 20 features.", body) +
         Card("average-shap", "Average SHAP values",
              "Mean SHAP value per feature at the last saved round, largest magnitude first.",
              shap);
}

std::string ScoresRow(const std::string& name, const ClassScores& s) {
  return absl::StrCat("<tr><td>", EscapeHtml(name), "</td><td class=\"num\">", Num(s.precision),
                      "</td><td class=\"num\">", Num(s.recall), "</td><td class=\"num\">",
                      Num(s.f1), "</td><td class=\"num\">", s.support, "</td></tr>");
}

std::string ConfusionTable(const XgboostAnalysis& a) {
  int64_t most = 1;
  for (const auto& row : a.confusion) {
    for (int64_t v : row) most = std::max(most, v);
  }
  std::string s = "<table id=\"confusion-matrix\"><tr><th>true \\ predicted</th>";
  for (size_t c = 0; c < a.confusion.size(); ++c) absl::StrAppend(&s, "<th>class ", c, "</th>");
  s += "</tr>";
  for (size_t t = 0; t < a.confusion.size(); ++t) {
    absl::StrAppend(&s, "<tr><th>class ", t, "</th>");
    for (int64_t v : a.confusion[t]) {
      const double shade = static_cast<double>(v) / most;
      absl::StrAppend(&s, "<td class=\"cm\" style=\"background:rgba(78,121,167,",
                      absl::StrFormat("%.2f", 0.08 + 0.8 * shade), ");color:",
                      shade > 0.5 ? "#fff" : "#1f2933", "\">", v, "</td>");
    }
    s += "</tr>";
  }
  return s + "</table>";
}

std::string ClassificationCards(const XgboostTrialData& data, const XgboostAnalysis& a) {
  if (a.confusion.empty()) {
    return Card("classification", "Classification", "",
                "<p class=\"empty\">No predictions that fit the labels yet.</p>");
  }
  std::string scores = "<table id=\"class-scores\"><tr><th></th><th class=\"num\">precision</th>"
                       "<th class=\"num\">recall</th><th class=\"num\">F1</th>"
                       "<th class=\"num\">support</th></tr>";
  for (size_t c = 0; c < a.per_class.size(); ++c) {
    scores += ScoresRow(absl::StrCat("class ", c), a.per_class[c]);
  }
  scores += ScoresRow("micro average", a.micro) + ScoresRow("macro average", a.macro) +
            ScoresRow("weighted average", a.weighted) + "</table>";
  std::string out = Card(
      "confusion", "Confusion matrix",
      absl::StrCat("Validation set at round ", data.predictions_round(), "; accuracy <b>",
                   Percent(a.accuracy), "</b>."),
      ConfusionTable(a) + "<h3>Precision, recall and F1</h3>" + scores);
  std::vector<Series> per_class(a.per_class.size());
  for (size_t c = 0; c < per_class.size(); ++c) per_class[c].label = absl::StrCat("class ", c);
  for (const ClassAccuracyAt& at : data.class_accuracy()) {
    for (size_t c = 0; c < at.accuracy.size() && c < per_class.size(); ++c) {
      per_class[c].points.emplace_back(static_cast<double>(at.round), at.accuracy[c]);
    }
  }
  out += Card("class-accuracy", "Accuracy per class over rounds",
              "Correct predictions of each class over its rows, per saved round.",
              LineChart("class-accuracy-chart", "accuracy per class", std::move(per_class),
                        "boosting round"));
  if (a.has_roc) {
    Series roc{absl::StrCat("ROC (AUC ", absl::StrFormat("%.4f", a.auc), ")"), a.roc};
    out += Card("roc", "ROC curve",
                absl::StrCat("True positive rate against false positive rate; AUC <b id=\"auc\">",
                             absl::StrFormat("%.4f", a.auc), "</b>."),
                LineChart("roc-chart", "ROC curve", {roc}, "false positive rate", true, 420));
  }
  return out;
}

std::string RegressionCards(const XgboostAnalysis& a) {
  if (a.residual_counts.empty()) {
    return Card("regression", "Residuals", "",
                "<p class=\"empty\">No predictions that fit the labels yet.</p>");
  }
  std::vector<std::string> labels;
  const double width = (a.residual_hi - a.residual_lo) / a.residual_counts.size();
  for (size_t i = 0; i < a.residual_counts.size(); ++i) {
    labels.push_back(Num(a.residual_lo + width * (i + 0.5)));
  }
  std::string out =
      Card("residuals", "Residual distribution", "label − prediction at the last saved round.",
           BarChart("residuals-chart", "residuals", labels,
                    std::vector<double>(a.residual_counts.begin(), a.residual_counts.end()),
                    "residual (bin centre)"));
  std::vector<std::string> bins;
  const double label_width = (a.label_hi - a.label_lo) / 10;
  for (int b = 0; b < 10; ++b) bins.push_back(Num(a.label_lo + label_width * (b + 0.5)));
  out += Card("error-per-label-bin", "Absolute validation error per label bin",
              "Mean |label − prediction| in 10 equal-width bins of the label.",
              BarChart("error-per-label-bin-chart", "absolute error per label bin", bins,
                       a.error_per_label_bin, "label (bin centre)"));
  return out;
}

}  // namespace

std::string RenderXgboostReportHtml(const XgboostTrialData& data, const XgboostAnalysis& analysis,
                                    const XgboostReportContext& context) {
  std::string page = Header(data, analysis, context);
  page += HintsCard(analysis, context);
  page += MetricsCard(data);
  page += LabelsCard(analysis);
  if (analysis.task == XgboostTask::kBinary || analysis.task == XgboostTask::kMulticlass) {
    page += ClassificationCards(data, analysis);
  } else if (analysis.task == XgboostTask::kRegression) {
    page += RegressionCards(analysis);
  }
  page += ImportanceCard(data);
  page += HyperparametersCard(data);
  if (!data.notes().empty()) {
    std::string notes;
    for (const std::string& note : data.notes()) {
      absl::StrAppend(&notes, "<li>", EscapeHtml(note), "</li>");
    }
    page += Card("notes", "Left out", "", absl::StrCat("<ul class=\"notes\">", notes, "</ul>"));
  }
  page += "</main>\n<footer style=\"text-align:center;color:#616e7c;font-size:13px;"
          "padding-bottom:24px\">debugplane · CreateXgboostReport</footer>\n</body></html>\n";
  return page;
}

namespace {

nlohmann::json Number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

nlohmann::json ScoresJson(const ClassScores& s) {
  return {{"precision", Number(s.precision)},
          {"recall", Number(s.recall)},
          {"f1", Number(s.f1)},
          {"support", s.support}};
}

nlohmann::json ClassificationJson(const XgboostTrialData& data, const XgboostAnalysis& a) {
  nlohmann::json out = {{"round", data.predictions_round()},
                        {"confusion_matrix", a.confusion},
                        {"accuracy", Number(a.accuracy)},
                        {"micro", ScoresJson(a.micro)},
                        {"macro", ScoresJson(a.macro)},
                        {"weighted", ScoresJson(a.weighted)}};
  out["per_class"] = nlohmann::json::array();
  for (const ClassScores& s : a.per_class) out["per_class"].push_back(ScoresJson(s));
  out["accuracy_per_class_over_rounds"] = nlohmann::json::array();
  for (const ClassAccuracyAt& at : data.class_accuracy()) {
    nlohmann::json values = nlohmann::json::array();
    for (double v : at.accuracy) values.push_back(Number(v));
    out["accuracy_per_class_over_rounds"].push_back({{"round", at.round}, {"accuracy", values}});
  }
  if (a.has_roc) {
    out["roc"] = {{"auc", Number(a.auc)}, {"points", a.roc}};
  }
  return out;
}

nlohmann::json RegressionJson(const XgboostAnalysis& a) {
  nlohmann::json errors = nlohmann::json::array();
  for (double v : a.error_per_label_bin) errors.push_back(Number(v));
  return {{"residual_histogram",
           {{"lo", Number(a.residual_lo)}, {"hi", Number(a.residual_hi)}, {"counts", a.residual_counts}}},
          {"absolute_error_per_label_bin",
           {{"lo", Number(a.label_lo)},
            {"hi", Number(a.label_hi)},
            {"mean_absolute_error", errors},
            {"rows", a.rows_per_label_bin}}}};
}

}  // namespace

std::string RenderXgboostReportJson(const XgboostTrialData& data, const XgboostAnalysis& analysis,
                                    const XgboostReportContext& context) {
  nlohmann::json out = {
      {"training_job_name", context.rule.training_job_name},
      {"rule_configuration_name", context.rule.rule_configuration_name},
      {"generated_at", FormatRfc3339(context.rule.generated_at)},
      {"final", context.rule.final},
      {"task", TaskName(analysis.task)},
      {"objective", analysis.objective},
      {"rounds_seen", data.rounds_seen()},
      {"last_round", data.last_round()},
      {"hyperparameters", data.hyperparameters()},
      {"missing_collections", context.missing_collections},
      {"notes", data.notes()}};
  out["label_distribution"] = {{"counts", analysis.label_counts}};
  if (analysis.task == XgboostTask::kRegression) {
    out["label_distribution"]["lo"] = Number(analysis.label_lo);
    out["label_distribution"]["hi"] = Number(analysis.label_hi);
  }
  nlohmann::json metrics = nlohmann::json::object();
  for (const auto& [name, points] : data.metrics()) {
    nlohmann::json series = nlohmann::json::array();
    for (const auto& [round, v] : points) series.push_back({round, Number(v)});
    metrics[name] = series;
  }
  out["metrics"] = metrics;
  out["hints"] = nlohmann::json::array();
  for (const CurveHint& hint : analysis.hints) {
    out["hints"].push_back({{"kind", hint.kind}, {"text", hint.text}});
  }
  out["feature_importance"] = data.importance();
  out["average_shap"] = data.average_shap();
  if (analysis.task == XgboostTask::kBinary || analysis.task == XgboostTask::kMulticlass) {
    out["classification"] = ClassificationJson(data, analysis);
  } else if (analysis.task == XgboostTask::kRegression) {
    out["regression"] = RegressionJson(analysis);
  }
  // Strings from the trial may hold invalid UTF-8: replaced, never thrown.
  return out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace debugplane::rules_engine
