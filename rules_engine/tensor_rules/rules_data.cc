// Rules on input data, labels and predictions: ClassImbalance,
// CheckInputImages, NLPSequenceRatio, Confusion.

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rules_engine/tensor_rules/rule_internal.h"

namespace debugplane::rules_engine::internal {
namespace {

// Class ids of a labels or predictions tensor: one per sample. A tensor of
// shape [batch, k] with k > 1 and `argmax` gives the argmax of each row; else
// each value rounded is a class id. Empty when the tensor cannot be read so.
std::vector<int64_t> ClassIds(const Tensor& t, bool argmax) {
  std::vector<int64_t> out;
  const BatchView view = ViewAsBatch(t);
  if (argmax && t.shape.size() >= 2 && view.units > 1) {
    // The first largest element of each row (std::max_element's).
    t.values.Visit([&](const auto& values) {
      size_t i = 0;
      for (int64_t b = 0; b < view.batch; ++b, i += view.units) {
        int64_t largest = 0;
        for (int64_t u = 1; u < view.units; ++u) {
          if (values[i + largest] < values[i + u]) largest = u;
        }
        out.push_back(largest);
      }
    });
    return out;
  }
  for (double v : t.values) {
    if (!std::isfinite(v) || std::fabs(v) > 1e9) return {};
    out.push_back(static_cast<int64_t>(std::llround(v)));
  }
  return out;
}

// At most this many distinct classes are tracked (bounded state).
constexpr size_t kMaxClasses = 100000;

// --- ClassImbalance -------------------------------------------------------------
// Counts labels per class (and, with predictions, correct predictions per
// class) cumulatively; once `samples` labels were seen, at every step: largest
// / smallest class count > threshold_imbalance fires, and so does a class
// whose fraction of mispredicted samples > threshold_misprediction.
// Decisions: only TRAIN (and GLOBAL) steps count: the imbalance is the
// training data's, and EVAL passes repeat the same validation samples.
// Labels of shape [batch, k] (one-hot) are argmax'd always; predictions only
// with argmax=True. A labels/predictions pair of different sizes is skipped
// (counted in the kError details: a probability vector needs argmax=True).
// A tensor matching both labels_regex and predictions_regex is counted, not
// skipped, and not refused at CreateTrainingJob (whether names overlap
// depends on the names a hook saves, unknown then):
//  - it is the labels when its worker saved, at that step, no tensor that
//    matches labels_regex alone; else it is a predictions tensor;
//  - the predictions of a labels tensor are the first other tensor of its
//    worker that matches predictions_regex and is not labels; failing that,
//    the labels tensor itself when it matches predictions_regex. Its
//    predictions are then the same tensor, which always agrees with itself:
//    mispredictions are not judged for it, and the NoIssuesFound summary
//    says so.
class ClassImbalance : public EvaluatingRule {
 public:
  ClassImbalance(double threshold_imbalance, double threshold_misprediction, int64_t samples,
                 bool argmax, std::string labels_regex, std::string predictions_regex)
      : EvaluatingRule("ClassImbalance"),
        threshold_imbalance_(threshold_imbalance),
        threshold_misprediction_(threshold_misprediction),
        samples_(samples),
        argmax_(argmax),
        labels_({}, {labels_regex}),
        predictions_({}, {predictions_regex}),
        labels_regex_(std::move(labels_regex)) {
    labels_.modes = TensorSelector::TrainingModes();
  }

  bool Wants(const std::string& tensor, const TrialInfo& info) const override {
    return labels_.Matches(tensor, info) || predictions_.Matches(tensor, info);
  }
  std::vector<std::string> RequiredCollections() const override {
    return {"labels", "predictions"};
  }

 protected:
  RuleVerdict Evaluate(const Step& step, const TrialInfo& info) override {
    for (const Tensor& t : step.tensors) {
      if (labels_.Matches(t.name, info)) labels_seen_.Note(step, t);
    }
    if (!labels_.Selects(step)) return RuleVerdict::Continue();
    for (const Tensor& labels : step.tensors) {
      if (labels.values.empty() || !IsLabels(labels, step, info)) continue;
      const std::vector<int64_t> y = ClassIds(labels, /*argmax=*/true);
      if (y.empty()) {
        ++not_class_ids_;
        continue;
      }
      CountSamples(y, PredictedClassIds(labels, y.size(), step, info));
    }
    if (total_ < samples_ || classes_.empty()) return RuleVerdict::Continue();
    ++evaluations_;
    ++steps_evaluated_;
    auto [min_it, max_it] = std::minmax_element(
        classes_.begin(), classes_.end(),
        [](const auto& a, const auto& b) { return a.second.samples < b.second.samples; });
    const double ratio =
        static_cast<double>(max_it->second.samples) / static_cast<double>(min_it->second.samples);
    if (classes_.size() >= 2 && ratio > threshold_imbalance_) {
      return RuleVerdict::Issues(Clip(absl::StrCat(
          StepLabel(step), ": after ", total_, " labels, class ", max_it->first, " has ",
          max_it->second.samples, " samples and class ", min_it->first, " ", min_it->second.samples,
          ": ratio ", Num(ratio), " > threshold_imbalance ", Num(threshold_imbalance_))));
    }
    for (const auto& [cls, c] : classes_) {
      if (c.predicted == 0) continue;
      const double wrong =
          static_cast<double>(c.predicted - c.correct) / static_cast<double>(c.predicted);
      if (wrong > threshold_misprediction_) {
        return RuleVerdict::Issues(Clip(
            absl::StrCat(StepLabel(step), ": class ", cls, " mispredicted in ",
                         c.predicted - c.correct, " of ", c.predicted, " samples (", Num(wrong),
                         ") > threshold_misprediction ", Num(threshold_misprediction_))));
      }
    }
    return RuleVerdict::Continue();
  }

 private:
  // The predicted class ids for `labels` (`count` of them), or none: no
  // predictions tensor, the labels predicting themselves, or a count that
  // does not match.
  std::vector<int64_t> PredictedClassIds(const Tensor& labels, size_t count, const Step& step,
                                         const TrialInfo& info) {
    const Tensor* predictions = PredictionsFor(labels, step, info);
    std::vector<int64_t> yhat;
    if (predictions == &labels) {
      if (self_predicted_.empty()) self_predicted_ = labels.name;
    } else if (predictions != nullptr) {
      yhat = ClassIds(*predictions, argmax_);
      if (yhat.size() != count) {
        ++mismatched_;
        yhat.clear();
      }
    }
    return yhat;
  }

  // Adds the samples `y` (with their predictions `yhat`, if any) to the
  // per-class counts (at most kMaxClasses classes).
  void CountSamples(const std::vector<int64_t>& y, const std::vector<int64_t>& yhat) {
    for (size_t i = 0; i < y.size(); ++i) {
      auto it = classes_.find(y[i]);
      if (it == classes_.end()) {
        if (classes_.size() >= kMaxClasses) continue;
        it = classes_.emplace(y[i], Counts()).first;
      }
      ++it->second.samples;
      ++total_;
      if (!yhat.empty()) {
        ++it->second.predicted;
        if (yhat[i] == y[i]) ++it->second.correct;
      }
    }
  }

 protected:
  std::string MissingData(const TrialInfo& info) const override {
    std::string out =
        WhyUnused("labels tensor", absl::StrCat("labels_regex ", QuoteName(labels_regex_)),
                  labels_seen_, steps_read(), labels_.modes, info, {"labels"});
    if (out.empty() && total_ > 0) {
      out = absl::StrCat("only ", total_, " labels were seen, fewer than samples (", samples_, ")");
    } else if (out.empty() && not_class_ids_ > 0) {
      out = absl::StrCat(labels_seen_.NamesWere(),
                         " saved, but never with class ids for values (NaN, infinite or beyond "
                         "1e9, ",
                         Times(not_class_ids_), ")");
    } else if (out.empty()) {
      out = absl::StrCat(labels_seen_.NamesWere(), " saved at ",
                         labels_seen_.steps().Of(labels_.modes), " ", ModesName(labels_.modes),
                         " steps, but no label was counted");
    }
    if (mismatched_ > 0) {
      absl::StrAppend(&out, "; ", mismatched_,
                      " predictions tensors did not have one class per label (set argmax to "
                      "True for per-class scores)");
    }
    return out;
  }

  std::string Summary() const override {
    std::string out = EvaluatingRule::Summary();
    if (!self_predicted_.empty()) {
      absl::StrAppend(&out, "; mispredictions were not judged for ", QuoteName(self_predicted_),
                      ": it matches both labels_regex and predictions_regex and no other "
                      "predictions tensor was saved beside it");
    }
    return out;
  }

 private:
  struct Counts {
    int64_t samples = 0, predicted = 0, correct = 0;
  };

  // Whether `t` of `step` is a labels tensor (see the class comment).
  bool IsLabels(const Tensor& t, const Step& step, const TrialInfo& info) const {
    if (!labels_.Matches(t.name, info)) return false;
    if (!predictions_.Matches(t.name, info)) return true;
    for (const Tensor& other : step.tensors) {
      if (other.worker == t.worker && !other.values.empty() && labels_.Matches(other.name, info) &&
          !predictions_.Matches(other.name, info)) {
        return false;  // Its worker has unambiguous labels: this one is predictions.
      }
    }
    return true;
  }

  // The predictions for `labels` (see the class comment), or nullptr.
  const Tensor* PredictionsFor(const Tensor& labels, const Step& step,
                               const TrialInfo& info) const {
    for (const Tensor& p : step.tensors) {
      if (&p != &labels && p.worker == labels.worker && !p.values.empty() &&
          predictions_.Matches(p.name, info) && !IsLabels(p, step, info)) {
        return &p;
      }
    }
    return predictions_.Matches(labels.name, info) ? &labels : nullptr;
  }

  double threshold_imbalance_, threshold_misprediction_;
  int64_t samples_;
  bool argmax_;
  TensorSelector labels_, predictions_;  // At TRAIN (and GLOBAL) steps.
  std::string labels_regex_;
  std::map<int64_t, Counts> classes_;
  int64_t total_ = 0, mismatched_ = 0;
  // Why labels did not count, for MissingData: where labels were saved (any
  // mode), and labels whose values were not class ids.
  SelectionSeen labels_seen_;
  int64_t not_class_ids_ = 0;
  // A labels tensor that was its own predictions (for Summary).
  std::string self_predicted_;
};

// --- CheckInputImages -----------------------------------------------------------
// Accumulates, for each input tensor matching `regex`, the per-channel sum of
// all samples' values (channel = the axis `channel` of the shape, axis 0
// being the batch); once threshold_samples images were seen, at every step
// a channel whose mean differs from 0 by more than threshold_mean fires.
class CheckInputImages : public SelectingRule {
 public:
  CheckInputImages(double threshold_mean, int64_t threshold_samples, std::string regex,
                   int64_t channel)
      : SelectingRule("CheckInputImages", TensorSelector({}, {regex})),
        threshold_mean_(threshold_mean),
        threshold_samples_(threshold_samples),
        regex_(std::move(regex)),
        channel_(channel) {}

 protected:
  RuleVerdict Evaluate(const Step& step, const TrialInfo& info) override {
    for (const Tensor& t : NoteWantedWithValues(step, info)) {
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      if (static_cast<int64_t>(t.shape.size()) <= std::max<int64_t>(channel_, 1) || channel_ < 1 ||
          n != static_cast<int64_t>(t.values.size())) {
        bad_shape_ = absl::StrCat(QuoteName(t.name), " has shape [", absl::StrJoin(t.shape, ","),
                                  "], without a channel axis ", channel_,
                                  " after the batch axis (parameter 'channel')");
        continue;
      }
      // Strides of C order: the channel index of element i is
      // (i / inner) % channels, inner = product of the dims after `channel`.
      const int64_t channels = t.shape[channel_];
      int64_t inner = 1;
      for (size_t d = channel_ + 1; d < t.shape.size(); ++d) inner *= t.shape[d];
      Accumulator& acc = inputs_[t.name];
      if (acc.sum.size() != static_cast<size_t>(channels)) {
        acc = Accumulator();
        acc.sum.assign(channels, 0);
        acc.count.assign(channels, 0);
      }
      t.values.Visit([&](const auto& values) {
        for (size_t i = 0; i < values.size(); ++i) {
          const int64_t c = (static_cast<int64_t>(i) / inner) % channels;
          acc.sum[c] += values[i];
          ++acc.count[c];
        }
      });
      acc.images += t.shape[0];
      if (acc.images < threshold_samples_) continue;
      ++evaluations_;
      for (int64_t c = 0; c < channels; ++c) {
        const double mean = acc.count[c] > 0 ? acc.sum[c] / acc.count[c] : 0;
        if (std::fabs(mean) > threshold_mean_) {
          return RuleVerdict::Issues(Clip(absl::StrCat(
              StepLabel(step), ": ", TensorLabel(t, info), " channel ", c, " mean ", Num(mean),
              " over ", acc.images, " images differs from 0 by more than threshold_mean ",
              Num(threshold_mean_), " (inputs are not normalized)")));
        }
      }
    }
    return RuleVerdict::Continue();
  }

  std::string MissingData(const TrialInfo& info) const override {
    const std::string why = WhyUnusedSelection(info, "input image tensor");
    if (!why.empty()) return why;
    if (inputs_.empty()) return bad_shape_;
    int64_t most = 0;
    for (const auto& [name, acc] : inputs_) most = std::max(most, acc.images);
    return absl::StrCat("only ", most, " images were seen, fewer than threshold_samples (",
                        threshold_samples_, ")", bad_shape_.empty() ? "" : "; ", bad_shape_);
  }

 private:
  struct Accumulator {
    std::vector<double> sum;
    std::vector<int64_t> count;
    int64_t images = 0;
  };
  double threshold_mean_;
  int64_t threshold_samples_;
  std::string regex_;
  int64_t channel_;
  std::map<std::string, Accumulator> inputs_;
  std::string bad_shape_;
};

// --- NLPSequenceRatio -----------------------------------------------------------
// At each step, in each input tensor matching tensor_regex, the percentage of
// values equal to token_values[i] above token_thresholds_percent[i] fires.
class NLPSequenceRatio : public SelectingRule {
 public:
  NLPSequenceRatio(TensorSelector selector, std::vector<double> tokens,
                   std::vector<double> thresholds)
      : SelectingRule("NLPSequenceRatio", std::move(selector)),
        tokens_(std::move(tokens)),
        thresholds_(std::move(thresholds)) {}

 protected:
  RuleVerdict Evaluate(const Step& step, const TrialInfo& info) override {
    return CheckSelected(step, info, [this](const Tensor& t) -> absl::optional<std::string> {
      for (size_t k = 0; k < tokens_.size(); ++k) {
        int64_t n = 0;
        for (double v : t.values) n += v == tokens_[k] ? 1 : 0;
        const double pct = 100.0 * static_cast<double>(n) / static_cast<double>(t.values.size());
        if (pct > thresholds_[k]) {
          return absl::StrCat("token ", Num(tokens_[k]), " is ", n, " of ", t.values.size(),
                              " values (", Num(pct), "%) > token_thresholds_percent ",
                              Num(thresholds_[k]), "%");
        }
      }
      return "";
    });
  }

  // Every selected tensor with values is evaluated.
  std::string MissingData(const TrialInfo& info) const override {
    return WhyUnusedSelection(info, "input sequence tensor");
  }

 private:
  std::vector<double> tokens_, thresholds_;
};

// --- Confusion ------------------------------------------------------------------
// At each step with labels and predictions, builds the confusion matrix
// confusion[label][prediction] of that step's samples. Decision: the doc's
// diagonal formula divides by the sum of the diagonal, which makes one
// class's test depend on the others' counts; like its off-diagonal formula we
// normalize by the column (all samples predicted as class i):
//   confusion[i][i] / sum_j confusion[j][i] >= min_diag, and
//   confusion[j][i] / sum_j confusion[j][i] <= max_off_diag (j != i);
// a violation fires. Columns with no sample are skipped. category_no unset:
// the largest class id seen + 1 (at least 2); ids outside [0, category_no)
// are skipped. Labels: the tensor named `labels`, else the first of
// labels_collection (likewise predictions); a [batch, k] tensor is argmax'd.
class Confusion : public EvaluatingRule {
 public:
  Confusion(absl::optional<int64_t> category_no, std::string labels, std::string predictions,
            std::string labels_collection, std::string predictions_collection, double min_diag,
            double max_off_diag)
      : EvaluatingRule("Confusion"),
        category_no_(category_no),
        labels_(std::move(labels)),
        predictions_(std::move(predictions)),
        labels_collection_(std::move(labels_collection)),
        predictions_collection_(std::move(predictions_collection)),
        min_diag_(min_diag),
        max_off_diag_(max_off_diag) {
    selector_.names = {labels_, predictions_};
    selector_.collections = {labels_collection_, predictions_collection_};
  }

  bool Wants(const std::string& tensor, const TrialInfo& info) const override {
    return selector_.Matches(tensor, info);
  }
  std::vector<std::string> RequiredCollections() const override {
    return {labels_collection_, predictions_collection_};
  }

 protected:
  RuleVerdict Evaluate(const Step& step, const TrialInfo& info) override {
    for (const Tensor& t : step.tensors) {
      if (t.name == labels_ || info.InCollection(labels_collection_, t.name)) {
        labels_seen_.Note(step, t);
      }
    }
    const Tensor* y = Pick(step, info, labels_, labels_collection_, nullptr);
    const Tensor* p = Pick(step, info, predictions_, predictions_collection_, y);
    if (y == nullptr) return RuleVerdict::Continue();
    ++steps_with_labels_;
    if (p == nullptr) return RuleVerdict::Continue();
    const std::vector<int64_t> yl = ClassIds(*y, true), pl = ClassIds(*p, true);
    if (yl.empty() || pl.empty()) {
      ++not_class_ids_;
      return RuleVerdict::Continue();
    }
    if (yl.size() != pl.size()) {
      ++mismatched_;
      last_mismatch_ = absl::StrCat(QuoteName(y->name), " ", yl.size(), " vs ", QuoteName(p->name),
                                    " ", pl.size(), " at ", StepLabel(step));
      return RuleVerdict::Continue();
    }
    int64_t k = category_no_.value_or(0);
    if (!category_no_) {
      for (size_t i = 0; i < yl.size(); ++i) k = std::max({k, yl[i] + 1, pl[i] + 1});
      k = std::clamp<int64_t>(k, 2, 10000);
    }
    std::vector<int64_t> m(k * k, 0);
    for (size_t i = 0; i < yl.size(); ++i) {
      if (yl[i] < 0 || yl[i] >= k || pl[i] < 0 || pl[i] >= k) continue;
      ++m[yl[i] * k + pl[i]];
    }
    ++evaluations_;
    ++steps_evaluated_;
    for (int64_t i = 0; i < k; ++i) {
      int64_t col = 0;
      for (int64_t j = 0; j < k; ++j) col += m[j * k + i];
      if (col == 0) continue;
      const double diag = static_cast<double>(m[i * k + i]) / static_cast<double>(col);
      if (diag < min_diag_) {
        return RuleVerdict::Issues(Clip(absl::StrCat(
            StepLabel(step), ": ", y->name, "/", p->name, " confusion[", i, "][", i, "] / column ",
            i, " = ", m[i * k + i], "/", col, " = ", Num(diag), " < min_diag ", Num(min_diag_))));
      }
      for (int64_t j = 0; j < k; ++j) {
        if (j == i) continue;
        const double off = static_cast<double>(m[j * k + i]) / static_cast<double>(col);
        if (off > max_off_diag_) {
          return RuleVerdict::Issues(
              Clip(absl::StrCat(StepLabel(step), ": ", y->name, "/", p->name, " confusion[", j,
                                "][", i, "] / column ", i, " = ", m[j * k + i], "/", col, " = ",
                                Num(off), " > max_off_diag ", Num(max_off_diag_))));
        }
      }
    }
    return RuleVerdict::Continue();
  }

  std::string MissingData(const TrialInfo& info) const override {
    const std::string why = WhyUnused("labels tensor",
                                      absl::StrCat("tensor ", QuoteName(labels_), " or collection ",
                                                   QuoteName(labels_collection_)),
                                      labels_seen_, steps_read(), {}, info, {labels_collection_});
    if (!why.empty()) return why;
    std::vector<std::string> reasons;
    if (mismatched_ > 0) {
      reasons.push_back(absl::StrCat(
          mismatched_, " steps had labels and predictions with different sample counts (last: ",
          last_mismatch_, " class ids; a [batch, k] tensor gives one per row)"));
    }
    if (not_class_ids_ > 0) {
      reasons.push_back(absl::StrCat(not_class_ids_,
                                     " steps had labels or predictions whose values are not class "
                                     "ids (NaN, infinite or beyond 1e9)"));
    }
    const int64_t without_predictions = steps_with_labels_ - mismatched_ - not_class_ids_;
    if (without_predictions > 0) {
      reasons.push_back(absl::StrCat(
          "labels were saved at ", without_predictions, " steps but no predictions (tensor ",
          QuoteName(predictions_), " or collection ", QuoteName(predictions_collection_),
          ") beside them; ", TrialTensors(info), CollectionNotes({predictions_collection_}, info)));
    }
    return absl::StrJoin(reasons, "; ");
  }

 private:
  const Tensor* Pick(const Step& step, const TrialInfo& info, const std::string& name,
                     const std::string& collection, const Tensor* not_this) const {
    if (const Tensor* t = step.Find(name); t != nullptr && !t->values.empty() && t != not_this) {
      return t;
    }
    for (const Tensor& t : step.tensors) {
      if (&t != not_this && !t.values.empty() && info.InCollection(collection, t.name)) return &t;
    }
    return nullptr;
  }

  absl::optional<int64_t> category_no_;
  std::string labels_, predictions_, labels_collection_, predictions_collection_;
  TensorSelector selector_;  // The two names and the two collections.
  double min_diag_, max_off_diag_;
  // Why nothing was evaluated, for MissingData.
  SelectionSeen labels_seen_;  // Tensors named `labels_` or in its collection, any mode.
  int64_t steps_with_labels_ = 0, mismatched_ = 0, not_class_ids_ = 0;
  std::string last_mismatch_;  // "'labels' 8 vs 'predictions' 4 at step 3 (...)".
};

}  // namespace

absl::StatusOr<std::unique_ptr<Rule>> MakeClassImbalance(RuleParameterReader& p,
                                                         const RuleContext&) {
  const double imbalance = p.Float("threshold_imbalance", 10, 1);
  const double misprediction = p.Float("threshold_misprediction", 0.7, 0, 1);
  const int64_t samples = p.Int("samples", 500, 1);
  const bool argmax = p.Bool("argmax", false);
  std::vector<std::string> labels = p.RegexList("labels_regex", {".*labels"});
  std::vector<std::string> predictions = p.RegexList("predictions_regex", {".*predictions"});
  if (absl::Status s = p.status(); !s.ok()) return s;
  // One regex each (the doc: "the name of the tensor"); a comma list is joined.
  return std::make_unique<ClassImbalance>(imbalance, misprediction, samples, argmax,
                                          absl::StrJoin(labels, "|"),
                                          absl::StrJoin(predictions, "|"));
}

absl::StatusOr<std::unique_ptr<Rule>> MakeCheckInputImages(RuleParameterReader& p,
                                                           const RuleContext&) {
  const double threshold_mean = p.Float("threshold_mean", 0.2, 0);
  const int64_t threshold_samples = p.Int("threshold_samples", 500, 1);
  std::string regex = p.Regex("regex", ".*hybridsequential0_input_0");
  const int64_t channel = p.Int("channel", 1, 1);
  if (absl::Status s = p.status(); !s.ok()) return s;
  return std::make_unique<CheckInputImages>(threshold_mean, threshold_samples, std::move(regex),
                                            channel);
}

absl::StatusOr<std::unique_ptr<Rule>> MakeNLPSequenceRatio(RuleParameterReader& p,
                                                           const RuleContext&) {
  TensorSelector selector = TensorSelector::FromParameters(
      p, {.collection_names = false, .default_regex = {".*embedding0_input_0"}});
  std::vector<double> tokens = p.FloatList("token_values", {0});
  std::vector<double> thresholds = p.FloatList("token_thresholds_percent", {50});
  if (p.status().ok() && tokens.size() != thresholds.size()) {
    p.Fail("token_thresholds_percent",
           absl::StrCat("must have one threshold per token value (", tokens.size(),
                        " token_values, ", thresholds.size(), " thresholds)"));
  }
  for (double t : thresholds) {
    if (p.status().ok() && (t < 0 || t > 100)) {
      p.Fail("token_thresholds_percent", absl::StrCat("must be percentages, got ", Num(t)));
    }
  }
  if (absl::Status s = p.status(); !s.ok()) return s;
  return std::make_unique<NLPSequenceRatio>(std::move(selector), std::move(tokens),
                                            std::move(thresholds));
}

absl::StatusOr<std::unique_ptr<Rule>> MakeConfusion(RuleParameterReader& p, const RuleContext&) {
  const absl::optional<int64_t> category_no = p.OptionalInt("category_no", 2, 10000);
  std::string labels = p.String("labels", "labels");
  std::string predictions = p.String("predictions", "predictions");
  std::string labels_collection = p.String("labels_collection", "labels");
  std::string predictions_collection = p.String("predictions_collection", "predictions");
  const double min_diag = p.Float("min_diag", 0.9, 0, 1);
  const double max_off_diag = p.Float("max_off_diag", 0.1, 0, 1);
  if (absl::Status s = p.status(); !s.ok()) return s;
  return std::make_unique<Confusion>(category_no, std::move(labels), std::move(predictions),
                                     std::move(labels_collection),
                                     std::move(predictions_collection), min_diag, max_off_diag);
}

}  // namespace debugplane::rules_engine::internal
