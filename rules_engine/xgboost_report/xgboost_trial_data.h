// What the XGBoost training report (CreateXgboostReport) is drawn from: the
// tensors smdebug's XGBoost hook saves, gathered round by round, and the
// figures computed from them (confusion matrix, ROC, residuals...).
//
//   XgboostTrialData data;
//   for (const Step& step : steps) data.AddStep(step, info);
//   const XgboostAnalysis analysis = Analyze(data);
//
// The hook saves, per saved boosting round (the global step): metrics
// ("train-logloss", "validation-auc", ...), "predictions" and "labels" (of
// the validation set), "feature_importance/<type>/<feature>" scalars,
// "average_shap/<feature>" scalars and "hyperparameters/<name>" (numbers, or
// STRING tensors such as "objective"). Anything unusable (non-finite values,
// predictions whose length does not fit the labels) is skipped and noted, never
// fatal: the report says what it left out.

#ifndef DEBUGPLANE_RULES_ENGINE_XGBOOST_REPORT_XGBOOST_TRIAL_DATA_H_
#define DEBUGPLANE_RULES_ENGINE_XGBOOST_REPORT_XGBOOST_TRIAL_DATA_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "rules_engine/smdebug/step.h"

namespace debugplane::rules_engine {

// The collections the report reads, and which tensors belong to each.
inline constexpr const char* kXgboostCollections[] = {
    "metrics", "predictions", "labels", "feature_importance", "average_shap", "hyperparameters"};
// The collection (of kXgboostCollections) `tensor` belongs to by the hook's
// names, or "" (the trial's collections file is consulted by the rule too).
std::string XgboostCollectionOf(const std::string& tensor);

// The five importance types the hook saves, in the report's order.
inline constexpr const char* kImportanceTypes[] = {"weight", "gain", "cover", "total_gain",
                                                   "total_cover"};

enum class XgboostTask { kUnknown, kBinary, kMulticlass, kRegression };
// "binary classification", "multiclass classification", "regression", "unknown".
std::string TaskName(XgboostTask task);

// Accuracy of each class (correct predictions of the class over its rows:
// its recall) at one saved round.
struct ClassAccuracyAt {
  int64_t round = 0;
  std::vector<double> accuracy;  // By class; NaN for a class without rows.
};

class XgboostTrialData {
 public:
  // Takes the hook's tensors of `step` (first worker of each name). Steps
  // come in ascending order.
  void AddStep(const Step& step, const TrialInfo& info);

  // Collections that gave at least one usable tensor.
  bool Saw(const std::string& collection) const;
  int64_t rounds_seen() const { return rounds_seen_; }
  int64_t last_round() const { return last_round_; }
  const std::map<std::string, std::vector<std::pair<int64_t, double>>>& metrics() const {
    return metrics_;
  }
  const std::map<std::string, std::string>& hyperparameters() const { return hyperparameters_; }
  // The last saved predictions and labels, and their shapes.
  const std::vector<double>& predictions() const { return predictions_; }
  const std::vector<int64_t>& prediction_shape() const { return prediction_shape_; }
  const std::vector<double>& labels() const { return labels_; }
  int64_t predictions_round() const { return predictions_round_; }
  // type -> feature -> value, as of the last round that saved the type.
  const std::map<std::string, std::map<std::string, double>>& importance() const {
    return importance_;
  }
  const std::map<std::string, double>& average_shap() const { return average_shap_; }
  const std::vector<ClassAccuracyAt>& class_accuracy() const { return class_accuracy_; }
  // What was skipped and why, one line each (at most kMaxNotes kept).
  const std::vector<std::string>& notes() const { return notes_; }

  // The task: from the objective hyperparameter ("binary:", "multi:",
  // "reg:"...), else from the predictions' shape (N x K: multiclass) and
  // values (labels all 0/1: binary; otherwise regression).
  XgboostTask task() const;
  // Classes of a classification: max(num_class, prediction columns, 1 + the
  // largest label), at least 2.
  int num_classes() const;
  // The class each prediction row stands for (argmax for N x K; for 1-D:
  // the rounded value for multi:softmax, the 0.5 (or 0 for binary:logitraw)
  // threshold for binary). Empty for regression.
  std::vector<int> PredictedClasses() const;
  // The score of the positive class per row, for ROC (binary only).
  std::vector<double> PositiveScores() const;

  static constexpr size_t kMaxNotes = 20;

 private:
  void Note(std::string note);
  void AddPredictionsAndLabels(int64_t round, const Tensor* predictions, const Tensor* labels);

  int64_t rounds_seen_ = 0;
  int64_t last_round_ = -1;
  std::map<std::string, int64_t> tensors_by_collection_;
  std::map<std::string, std::vector<std::pair<int64_t, double>>> metrics_;
  std::map<std::string, std::string> hyperparameters_;
  std::vector<double> predictions_;
  std::vector<int64_t> prediction_shape_;
  std::vector<double> labels_;
  int64_t predictions_round_ = -1;
  std::map<std::string, std::map<std::string, double>> importance_;
  std::map<std::string, double> average_shap_;
  std::vector<ClassAccuracyAt> class_accuracy_;
  std::vector<std::string> notes_;
};

// Lower is better for a metric, except the AUC, MAP, NDCG and accuracy kinds.
bool MetricHigherIsBetter(const std::string& metric);

// Precision, recall and F1 of one class, or averaged.
struct ClassScores {
  double precision = 0, recall = 0, f1 = 0;
  int64_t support = 0;  // Rows whose label is the class (all rows for averages).
};

// A hint about the metric curves: which curves, the rule of thumb, what to do.
struct CurveHint {
  std::string kind;  // "overfitting" or "underfitting".
  std::string text;
};

struct XgboostAnalysis {
  XgboostTask task = XgboostTask::kUnknown;
  std::string objective;  // The hyperparameter, or "".
  // Label distribution: classification, count per class; regression, a
  // 10-bin histogram of the labels over [label_lo, label_hi].
  std::vector<int64_t> label_counts;
  double label_lo = 0, label_hi = 0;
  std::vector<CurveHint> hints;
  // Classification, at the last saved round.
  std::vector<std::vector<int64_t>> confusion;  // [true class][predicted class].
  std::vector<ClassScores> per_class;
  ClassScores micro, macro, weighted;
  double accuracy = 0;
  // Binary: the ROC curve (false positive rate, true positive rate), from
  // (0,0) to (1,1), and its area.
  std::vector<std::pair<double, double>> roc;
  double auc = 0;
  bool has_roc = false;
  // Regression: residuals (label - prediction) in 20 bins over
  // [residual_lo, residual_hi], and mean absolute error per label bin (10
  // equal-width bins over the label range; NaN where a bin has no rows).
  std::vector<int64_t> residual_counts;
  double residual_lo = 0, residual_hi = 0;
  std::vector<double> error_per_label_bin;
  std::vector<int64_t> rows_per_label_bin;
};

// The report's figures from `data`. Pure: the same data, the same figures.
XgboostAnalysis Analyze(const XgboostTrialData& data);

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_XGBOOST_REPORT_XGBOOST_TRIAL_DATA_H_
