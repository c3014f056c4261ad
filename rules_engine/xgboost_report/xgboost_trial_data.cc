#include "rules_engine/xgboost_report/xgboost_trial_data.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace debugplane::rules_engine {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Rounds of the rules of thumb: a validation metric that has not improved
// for this many rounds while the training one did (overfitting); a training
// metric that still improves by more than kStillImproving over as many
// (underfitting: more rounds or a larger model may help).
constexpr int64_t kHintRounds = 10;
constexpr double kStillImproving = 0.01;

bool IsMetricName(const std::string& name) {
  return absl::StartsWith(name, "train-") || absl::StartsWith(name, "validation-");
}

// Label value as a class index, or -1 when it is not one of `classes`.
int ClassOf(double label, int classes) {
  if (!std::isfinite(label)) return -1;
  const double rounded = std::round(label);
  if (std::fabs(label - rounded) > 1e-6 || rounded < 0 || rounded >= classes) return -1;
  return static_cast<int>(rounded);
}

std::string FormatNumber(double v) { return absl::StrFormat("%.6g", v); }

// Equal-width bins of `values` over [lo, hi] (finite values only).
std::vector<int64_t> Histogram(const std::vector<double>& values, int bins, double* lo,
                               double* hi) {
  *lo = std::numeric_limits<double>::infinity();
  *hi = -std::numeric_limits<double>::infinity();
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    *lo = std::min(*lo, v);
    *hi = std::max(*hi, v);
  }
  std::vector<int64_t> counts(bins, 0);
  if (*lo > *hi) {
    *lo = *hi = 0;
    return counts;
  }
  const double width = (*hi - *lo) / bins;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    int bin = width > 0 ? static_cast<int>((v - *lo) / width) : 0;
    counts[std::clamp(bin, 0, bins - 1)]++;
  }
  return counts;
}

}  // namespace

std::string XgboostCollectionOf(const std::string& tensor) {
  if (tensor == "predictions") return "predictions";
  if (tensor == "labels") return "labels";
  if (absl::StartsWith(tensor, "feature_importance/")) return "feature_importance";
  if (absl::StartsWith(tensor, "average_shap/")) return "average_shap";
  if (absl::StartsWith(tensor, "hyperparameters/")) return "hyperparameters";
  if (IsMetricName(tensor)) return "metrics";
  return "";
}

std::string TaskName(XgboostTask task) {
  switch (task) {
    case XgboostTask::kBinary:
      return "binary classification";
    case XgboostTask::kMulticlass:
      return "multiclass classification";
    case XgboostTask::kRegression:
      return "regression";
    case XgboostTask::kUnknown:
      break;
  }
  return "unknown";
}

bool MetricHigherIsBetter(const std::string& metric) {
  for (const char* better : {"auc", "map", "ndcg", "accuracy", "aucpr", "pre"}) {
    if (absl::EndsWith(metric, absl::StrCat("-", better)) ||
        absl::StrContains(metric, absl::StrCat("-", better, "@"))) {
      return true;
    }
  }
  return false;
}

void XgboostTrialData::Note(std::string note) {
  if (notes_.size() < kMaxNotes) notes_.push_back(std::move(note));
}

bool XgboostTrialData::Saw(const std::string& collection) const {
  auto it = tensors_by_collection_.find(collection);
  return it != tensors_by_collection_.end() && it->second > 0;
}

void XgboostTrialData::AddStep(const Step& step, const TrialInfo& info) {
  const int64_t round = step.global_step;
  const Tensor* predictions = nullptr;
  const Tensor* labels = nullptr;
  std::map<std::string, std::map<std::string, double>> importance;
  std::map<std::string, double> shap;
  const std::string* previous = nullptr;
  for (const Tensor& t : step.tensors) {
    if (previous != nullptr && *previous == t.name) continue;  // Other workers.
    previous = &t.name;
    std::string collection = XgboostCollectionOf(t.name);
    if (collection.empty() && info.InCollection("metrics", t.name)) collection = "metrics";
    if (collection.empty()) continue;
    const bool scalar = t.values.size() == 1 && std::isfinite(t.values[0]);
    if (collection == "hyperparameters") {
      const std::string key = t.name.substr(std::string("hyperparameters/").size());
      if (!t.strings.empty()) {
        hyperparameters_[key] = absl::StrJoin(t.strings, ",");
      } else if (!t.values.empty()) {
        hyperparameters_[key] = absl::StrJoin(t.values, ",", [](std::string* out, double v) {
          out->append(FormatNumber(v));
        });
      } else {
        continue;
      }
    } else if (collection == "predictions") {
      predictions = &t;
    } else if (collection == "labels") {
      labels = &t;
    } else if (!scalar) {
      Note(absl::StrCat("round ", round, ": ", t.name, " is not one finite number; skipped"));
      continue;
    } else if (collection == "metrics") {
      metrics_[t.name].emplace_back(round, t.values[0]);
    } else if (collection == "feature_importance") {
      const std::string rest = t.name.substr(std::string("feature_importance/").size());
      const size_t slash = rest.find('/');
      if (slash == std::string::npos) continue;
      importance[rest.substr(0, slash)][rest.substr(slash + 1)] = t.values[0];
    } else {  // average_shap
      shap[t.name.substr(std::string("average_shap/").size())] = t.values[0];
    }
    tensors_by_collection_[collection]++;
  }
  for (auto& [type, features] : importance) importance_[type] = std::move(features);
  if (!shap.empty()) average_shap_ = std::move(shap);
  AddPredictionsAndLabels(round, predictions, labels);
  ++rounds_seen_;
  last_round_ = round;
}

void XgboostTrialData::AddPredictionsAndLabels(int64_t round, const Tensor* predictions,
                                               const Tensor* labels) {
  if (labels != nullptr && !labels->values.empty()) {
    labels_ = labels->values.ToVector();
    tensors_by_collection_["labels"]++;
  }
  if (predictions == nullptr || predictions->values.empty()) return;
  for (double v : predictions->values) {
    if (!std::isfinite(v)) {
      Note(absl::StrCat("round ", round, ": predictions hold a non-finite value; skipped"));
      return;
    }
  }
  predictions_ = predictions->values.ToVector();
  prediction_shape_ = predictions->shape;
  predictions_round_ = round;
  tensors_by_collection_["predictions"]++;
  const XgboostTask current = task();
  if (current != XgboostTask::kBinary && current != XgboostTask::kMulticlass) return;
  const std::vector<int> predicted = PredictedClasses();
  if (predicted.empty()) {
    Note(absl::StrCat("round ", round, ": predictions of shape [",
                      absl::StrJoin(prediction_shape_, ","), "] do not fit the ", labels_.size(),
                      " labels; no classification figures from them"));
    return;
  }
  const int classes = num_classes();
  std::vector<int64_t> rows(classes, 0), correct(classes, 0);
  for (size_t i = 0; i < predicted.size(); ++i) {
    const int truth = ClassOf(labels_[i], classes);
    if (truth < 0) continue;
    rows[truth]++;
    correct[truth] += predicted[i] == truth ? 1 : 0;
  }
  ClassAccuracyAt at{.round = round, .accuracy = std::vector<double>(classes, kNaN)};
  for (int c = 0; c < classes; ++c) {
    if (rows[c] > 0) at.accuracy[c] = static_cast<double>(correct[c]) / rows[c];
  }
  class_accuracy_.push_back(std::move(at));
}

XgboostTask XgboostTrialData::task() const {
  auto it = hyperparameters_.find("objective");
  if (it != hyperparameters_.end()) {
    const std::string& objective = it->second;
    if (absl::StartsWith(objective, "binary:")) return XgboostTask::kBinary;
    if (absl::StartsWith(objective, "multi:")) return XgboostTask::kMulticlass;
    for (const char* regression : {"reg:", "count:", "survival:", "rank:"}) {
      if (absl::StartsWith(objective, regression)) return XgboostTask::kRegression;
    }
  }
  if (prediction_shape_.size() == 2 && prediction_shape_[1] > 1) return XgboostTask::kMulticlass;
  if (predictions_.empty() || labels_.empty()) return XgboostTask::kUnknown;
  const bool labels_binary = std::all_of(labels_.begin(), labels_.end(),
                                         [](double v) { return v == 0 || v == 1; });
  const bool probabilities = std::all_of(predictions_.begin(), predictions_.end(),
                                         [](double v) { return v >= 0 && v <= 1; });
  if (labels_binary && probabilities) return XgboostTask::kBinary;
  if (hyperparameters_.count("num_class") > 0) return XgboostTask::kMulticlass;
  return XgboostTask::kRegression;
}

int XgboostTrialData::num_classes() const {
  int64_t classes = 2;
  if (prediction_shape_.size() == 2) classes = std::max(classes, prediction_shape_[1]);
  if (auto it = hyperparameters_.find("num_class"); it != hyperparameters_.end()) {
    double n = 0;
    if (absl::SimpleAtod(it->second, &n) && n >= 2 && n <= 1000) {
      classes = std::max<int64_t>(classes, static_cast<int64_t>(n));
    }
  }
  for (double label : labels_) {
    if (std::isfinite(label) && label >= 0 && label < 1000) {
      classes = std::max<int64_t>(classes, static_cast<int64_t>(std::round(label)) + 1);
    }
  }
  return static_cast<int>(std::min<int64_t>(classes, 1000));
}

std::vector<int> XgboostTrialData::PredictedClasses() const {
  const size_t rows = labels_.size();
  if (rows == 0 || predictions_.empty()) return {};
  std::vector<int> out(rows);
  if (prediction_shape_.size() == 2 && prediction_shape_[0] == static_cast<int64_t>(rows) &&
      prediction_shape_[1] > 1 &&
      predictions_.size() == rows * static_cast<size_t>(prediction_shape_[1])) {
    const size_t k = prediction_shape_[1];
    for (size_t i = 0; i < rows; ++i) {
      const double* row = predictions_.data() + i * k;
      out[i] = static_cast<int>(std::max_element(row, row + k) - row);
    }
    return out;
  }
  if (predictions_.size() != rows) return {};
  auto objective = hyperparameters_.find("objective");
  const std::string kind = objective == hyperparameters_.end() ? "" : objective->second;
  const XgboostTask current = task();
  if (current == XgboostTask::kMulticlass) {
    for (size_t i = 0; i < rows; ++i) out[i] = static_cast<int>(std::lround(predictions_[i]));
    return out;
  }
  if (current != XgboostTask::kBinary) return {};
  const double threshold = kind == "binary:logitraw" ? 0.0 : 0.5;
  for (size_t i = 0; i < rows; ++i) out[i] = predictions_[i] >= threshold ? 1 : 0;
  return out;
}

std::vector<double> XgboostTrialData::PositiveScores() const {
  const size_t rows = labels_.size();
  if (predictions_.size() == rows) return predictions_;
  if (prediction_shape_.size() == 2 && prediction_shape_[1] == 2 && predictions_.size() == 2 * rows) {
    std::vector<double> out(rows);
    for (size_t i = 0; i < rows; ++i) out[i] = predictions_[2 * i + 1];
    return out;
  }
  return {};
}

namespace {

// The value of `series` at the latest round <= `round`, or nullptr.
const std::pair<int64_t, double>* AtOrBefore(const std::vector<std::pair<int64_t, double>>& series,
                                             int64_t round) {
  const std::pair<int64_t, double>* found = nullptr;
  for (const auto& point : series) {
    if (point.first <= round) found = &point;
  }
  return found;
}

bool Better(double a, double b, bool higher_is_better) {
  return higher_is_better ? a > b : a < b;
}

void OverfittingHint(const std::string& metric, const std::vector<std::pair<int64_t, double>>& val,
                     const std::vector<std::pair<int64_t, double>>& train,
                     std::vector<CurveHint>* hints) {
  const bool higher = MetricHigherIsBetter(metric);
  size_t best = 0;
  for (size_t i = 1; i < val.size(); ++i) {
    if (Better(val[i].second, val[best].second, higher)) best = i;
  }
  const auto& last = val.back();
  if (last.first - val[best].first < kHintRounds || !Better(val[best].second, last.second, higher)) {
    return;
  }
  const auto* train_best = AtOrBefore(train, val[best].first);
  const auto* train_last = AtOrBefore(train, last.first);
  if (train_best == nullptr || train_last == nullptr ||
      !Better(train_last->second, train_best->second, higher)) {
    return;
  }
  hints->push_back(
      {"overfitting",
       absl::StrCat("validation-", metric, " was best at round ", val[best].first, " (",
                    FormatNumber(val[best].second), ") and is worse ", last.first - val[best].first,
                    " rounds later (", FormatNumber(last.second), " at round ", last.first,
                    ") while train-", metric, " kept improving (", FormatNumber(train_best->second),
                    " -> ", FormatNumber(train_last->second),
                    "). Rule of thumb: a validation metric that stops improving for ", kHintRounds,
                    " or more rounds while the training metric improves means overfitting; stop "
                    "near round ",
                    val[best].first,
                    " (early_stopping_rounds), or lower max_depth or eta, or raise lambda, alpha, "
                    "min_child_weight, or subsample less.")});
}

void UnderfittingHint(const std::string& metric, const std::vector<std::pair<int64_t, double>>& train,
                      const std::vector<std::pair<int64_t, double>>* val,
                      std::vector<CurveHint>* hints) {
  const bool higher = MetricHigherIsBetter(metric);
  const auto& last = train.back();
  const auto* before = AtOrBefore(train, last.first - kHintRounds);
  if (before == nullptr) return;
  const double change = (last.second - before->second) / std::max(std::fabs(before->second), 1e-12);
  if ((higher ? change : -change) <= kStillImproving) return;
  if (val != nullptr && !val->empty()) {
    const auto* val_before = AtOrBefore(*val, last.first - kHintRounds);
    if (val_before == nullptr || !Better(val->back().second, val_before->second, higher)) return;
  }
  hints->push_back(
      {"underfitting",
       absl::StrCat("train-", metric, val != nullptr ? " and validation-" + metric : "",
                    " still improved over the last ", last.first - before->first, " rounds (train-",
                    metric, " ", FormatNumber(before->second), " -> ", FormatNumber(last.second), ", ",
                    absl::StrFormat("%.1f", std::fabs(change) * 100),
                    "%) when training stopped. Rule of thumb: a training metric still improving by "
                    "more than 1% over the last ",
                    kHintRounds,
                    " rounds means the model may be underfit; train more rounds (num_round), or "
                    "raise max_depth or eta.")});
}

void CurveHints(const XgboostTrialData& data, XgboostAnalysis* out) {
  for (const auto& [name, train] : data.metrics()) {
    if (!absl::StartsWith(name, "train-") || train.empty()) continue;
    const std::string metric = name.substr(6);
    auto val_it = data.metrics().find("validation-" + metric);
    const std::vector<std::pair<int64_t, double>>* val =
        val_it == data.metrics().end() || val_it->second.empty() ? nullptr : &val_it->second;
    if (val != nullptr) OverfittingHint(metric, *val, train, &out->hints);
    UnderfittingHint(metric, train, val, &out->hints);
  }
}

ClassScores ScoresOf(int64_t tp, int64_t fp, int64_t fn) {
  ClassScores s;
  s.precision = tp + fp > 0 ? static_cast<double>(tp) / (tp + fp) : 0;
  s.recall = tp + fn > 0 ? static_cast<double>(tp) / (tp + fn) : 0;
  s.f1 = s.precision + s.recall > 0 ? 2 * s.precision * s.recall / (s.precision + s.recall) : 0;
  return s;
}

void Classification(const XgboostTrialData& data, XgboostAnalysis* out) {
  const int k = data.num_classes();
  out->label_counts.assign(k, 0);
  for (double label : data.labels()) {
    if (const int c = ClassOf(label, k); c >= 0) out->label_counts[c]++;
  }
  const std::vector<int> predicted = data.PredictedClasses();
  if (predicted.empty()) return;
  out->confusion.assign(k, std::vector<int64_t>(k, 0));
  int64_t rows = 0, correct = 0;
  for (size_t i = 0; i < predicted.size(); ++i) {
    const int truth = ClassOf(data.labels()[i], k);
    if (truth < 0 || predicted[i] < 0 || predicted[i] >= k) continue;
    out->confusion[truth][predicted[i]]++;
    ++rows;
    correct += truth == predicted[i] ? 1 : 0;
  }
  out->accuracy = rows > 0 ? static_cast<double>(correct) / rows : 0;
  int counted = 0;
  for (int c = 0; c < k; ++c) {
    int64_t tp = out->confusion[c][c], fp = 0, fn = 0;
    for (int o = 0; o < k; ++o) {
      if (o == c) continue;
      fp += out->confusion[o][c];
      fn += out->confusion[c][o];
    }
    ClassScores s = ScoresOf(tp, fp, fn);
    s.support = tp + fn;
    out->per_class.push_back(s);
    if (tp + fp + fn == 0) continue;  // In neither labels nor predictions.
    ++counted;
    out->macro.precision += s.precision;
    out->macro.recall += s.recall;
    out->macro.f1 += s.f1;
    if (rows > 0) {
      const double w = static_cast<double>(s.support) / rows;
      out->weighted.precision += w * s.precision;
      out->weighted.recall += w * s.recall;
      out->weighted.f1 += w * s.f1;
    }
  }
  if (counted > 0) {
    out->macro.precision /= counted;
    out->macro.recall /= counted;
    out->macro.f1 /= counted;
  }
  // Single-label: every wrong row is one false positive and one false
  // negative, so micro precision = recall = F1 = accuracy.
  out->micro = ScoresOf(correct, rows - correct, rows - correct);
  out->micro.support = out->macro.support = out->weighted.support = rows;
}

void Roc(const XgboostTrialData& data, XgboostAnalysis* out) {
  const std::vector<double> scores = data.PositiveScores();
  if (scores.size() != data.labels().size() || scores.empty()) return;
  std::vector<std::pair<double, bool>> rows;
  int64_t positives = 0, negatives = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    const int c = ClassOf(data.labels()[i], 2);
    if (c < 0) continue;
    rows.emplace_back(scores[i], c == 1);
    (c == 1 ? positives : negatives)++;
  }
  if (positives == 0 || negatives == 0) return;
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  out->roc.emplace_back(0, 0);
  int64_t tp = 0, fp = 0;
  double auc = 0;
  for (size_t i = 0; i < rows.size();) {
    const double threshold = rows[i].first;
    const int64_t tp_before = tp, fp_before = fp;
    for (; i < rows.size() && rows[i].first == threshold; ++i) (rows[i].second ? tp : fp)++;
    // Trapezoid between the points (ties move diagonally).
    auc += (fp - fp_before) * (tp + tp_before) / 2.0;
    out->roc.emplace_back(static_cast<double>(fp) / negatives, static_cast<double>(tp) / positives);
  }
  out->auc = auc / (static_cast<double>(positives) * negatives);
  out->has_roc = true;
}

void Regression(const XgboostTrialData& data, XgboostAnalysis* out) {
  out->label_counts = Histogram(data.labels(), 10, &out->label_lo, &out->label_hi);
  const std::vector<double>& labels = data.labels();
  const std::vector<double>& predictions = data.predictions();
  if (predictions.size() != labels.size() || labels.empty()) return;
  std::vector<double> residuals(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) residuals[i] = labels[i] - predictions[i];
  out->residual_counts = Histogram(residuals, 20, &out->residual_lo, &out->residual_hi);
  out->error_per_label_bin.assign(10, 0);
  out->rows_per_label_bin.assign(10, 0);
  const double width = (out->label_hi - out->label_lo) / 10;
  for (size_t i = 0; i < labels.size(); ++i) {
    if (!std::isfinite(labels[i]) || !std::isfinite(residuals[i])) continue;
    const int bin =
        std::clamp(width > 0 ? static_cast<int>((labels[i] - out->label_lo) / width) : 0, 0, 9);
    out->error_per_label_bin[bin] += std::fabs(residuals[i]);
    out->rows_per_label_bin[bin]++;
  }
  for (int b = 0; b < 10; ++b) {
    out->error_per_label_bin[b] =
        out->rows_per_label_bin[b] > 0 ? out->error_per_label_bin[b] / out->rows_per_label_bin[b]
                                       : kNaN;
  }
}

}  // namespace

XgboostAnalysis Analyze(const XgboostTrialData& data) {
  XgboostAnalysis out;
  out.task = data.task();
  if (auto it = data.hyperparameters().find("objective"); it != data.hyperparameters().end()) {
    out.objective = it->second;
  }
  CurveHints(data, &out);
  if (out.task == XgboostTask::kBinary || out.task == XgboostTask::kMulticlass) {
    Classification(data, &out);
    if (out.task == XgboostTask::kBinary) Roc(data, &out);
  } else if (out.task == XgboostTask::kRegression) {
    Regression(data, &out);
  }
  return out;
}

}  // namespace debugplane::rules_engine
