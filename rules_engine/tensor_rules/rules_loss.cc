// Loss rules: LossNotDecreasing, Overfit, Overtraining.

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rules_engine/tensor_rules/rule_internal.h"

namespace debugplane::rules_engine::internal {
namespace {

// The loss of a step: the mean over the matching tensors (of all workers) of
// each tensor's mean (losses are scalars; a vector loss counts by its mean).
absl::optional<double> StepLoss(const Step& step, const TrialInfo& info,
                                const TensorSelector& selector) {
  double sum = 0;
  int n = 0;
  for (const Tensor& t : step.tensors) {
    if (t.values.empty() || !selector.Matches(t.name, info)) continue;
    sum += Mean(t.values);
    ++n;
  }
  if (n == 0) return absl::nullopt;
  return sum / n;
}

int ModeRank(Mode m) {
  switch (m) {
    case Mode::kEval:
      return 0;
    case Mode::kTrain:
      return 1;
    case Mode::kGlobal:
      return 2;
    case Mode::kPredict:
      return 3;
  }
  return 3;
}

// --- LossNotDecreasing ----------------------------------------------------------
// Every `num_steps` steps (the first step with a loss at least num_steps after
// the last check) each loss tensor is compared with its value at the last
// check: a decrease of less than diff_percent percent of that value fires,
// and so does a value more than increase_threshold_percent above the lowest
// value seen at a check (a loss that rose and is only partly recovering).
//
// Decisions on `mode` (the doc says both "default GLOBAL" and "checks in
// order EVAL, then TRAIN, then GLOBAL"):
//  - unset: the steps of one mode are compared, by mode step: EVAL when the
//    trial has EVAL losses, else TRAIN, else GLOBAL-mode steps. Evaluating
//    incrementally, TRAIN losses are compared only until the first EVAL loss
//    arrives; from then on EVAL alone (comparisons made before stand). The
//    validation loss is the meaningful one: per-batch training losses are
//    noisy enough to fail a 0.1% check on a healthy run.
//  - "TRAIN"/"EVAL": only that mode's steps, by mode step;
//  - "GLOBAL": every step, by global step (smdebug's GLOBAL view, which mixes
//    the modes' losses).
class LossNotDecreasing : public SelectingRule {
 public:
  LossNotDecreasing(TensorSelector selector, int64_t num_steps, double diff_percent,
                    double increase_percent, absl::optional<std::string> mode)
      : SelectingRule("LossNotDecreasing", std::move(selector)),
        num_steps_(num_steps),
        diff_percent_(diff_percent),
        increase_percent_(increase_percent),
        mode_(std::move(mode)) {}

 protected:
  RuleVerdict Evaluate(const Step& step, const TrialInfo& info) override {
    bool has_loss = false;
    for (const Tensor& t : step.tensors) {
      if (!Wants(t.name, info)) continue;
      seen_.Note(step, t);
      if (!t.values.empty()) has_loss = true;
    }
    if (!has_loss) return RuleVerdict::Continue();
    int64_t n = step.mode_step;
    if (mode_) {
      if (*mode_ == "GLOBAL") {
        n = step.global_step;
      } else if (ModeName(step.mode) != *mode_) {
        return RuleVerdict::Continue();
      }
    } else {
      if (step.mode == Mode::kPredict) return RuleVerdict::Continue();
      if (!active_ || ModeRank(step.mode) < ModeRank(*active_)) {
        active_ = step.mode;
        series_.clear();  // A preferred mode appeared: start over on it.
      }
      if (step.mode != *active_) return RuleVerdict::Continue();
    }
    bool compared = false;
    for (const Tensor& t : step.tensors) {
      if (t.values.empty() || !Wants(t.name, info)) continue;
      const double v = Mean(t.values);
      Series& s = series_[{t.name, t.worker}];
      if (!s.has_base) {
        s = Series{true, n, v, v};
        continue;
      }
      if (n < s.base_step + num_steps_) continue;
      compared = true;
      ++evaluations_;
      const std::string where = absl::StrCat(StepLabel(step), ": ", TensorLabel(t, info), " ");
      const double allowed = s.min + std::fabs(s.min) * increase_percent_ / 100.0;
      if (v > allowed) {
        return RuleVerdict::Issues(
            Clip(absl::StrCat(where, Num(v), " is ", Num(Percent(v - s.min, s.min)),
                              "% above its lowest checked value ", Num(s.min),
                              ", more than increase_threshold_percent ", Num(increase_percent_))));
      }
      const double decrease = s.base == 0 ? (v < 0 ? std::numeric_limits<double>::infinity() : 0)
                                          : (s.base - v) / std::fabs(s.base) * 100.0;
      if (!(decrease >= diff_percent_)) {
        return RuleVerdict::Issues(Clip(absl::StrCat(
            where, Num(v), " decreased by ", Num(decrease), "% since ", Num(s.base), " at ",
            ModeView(step), " step ", s.base_step, ", less than diff_percent ", Num(diff_percent_),
            " in ", n - s.base_step, " steps (num_steps ", num_steps_, ")")));
      }
      s.base_step = n;
      s.base = v;
      s.min = std::min(s.min, v);
    }
    if (compared) ++steps_evaluated_;
    return RuleVerdict::Continue();
  }

  std::string MissingData(const TrialInfo& info) const override {
    const std::string why = WhyUnusedSelection(info, "loss tensor");
    if (!why.empty()) return why;
    // Losses were saved: in which modes, and were those compared?
    const ModeCounts& with_loss = seen_.steps();
    const std::vector<Mode> compared = ComparedModes();
    if (with_loss.Of(compared) == 0) {
      return absl::StrCat("no loss at a ", ModesName(compared), " step (", ModeChoice(),
                          "): ", seen_.NamesWere(), " saved at ", with_loss.Describe(), " only");
    }
    return absl::StrCat("losses were saved at ", with_loss.Total(), " steps (",
                        with_loss.Describe(), "), but never num_steps (", num_steps_,
                        ") steps apart in one mode: nothing to compare (", ModeChoice(), ")");
  }

 private:
  struct Series {
    bool has_base = false;
    int64_t base_step = 0;
    double base = 0;
    double min = 0;
  };
  static double Percent(double diff, double base) {
    return base == 0 ? std::numeric_limits<double>::infinity() : diff / std::fabs(base) * 100.0;
  }
  std::string ModeView(const Step& step) const {
    return mode_ && *mode_ == "GLOBAL" ? std::string("global") : std::string(ModeName(step.mode));
  }
  // The modes whose steps are compared.
  std::vector<Mode> ComparedModes() const {
    if (!mode_ || *mode_ == "GLOBAL") {
      return mode_ ? std::vector<Mode>{Mode::kTrain, Mode::kEval, Mode::kPredict, Mode::kGlobal}
                   : std::vector<Mode>{Mode::kEval, Mode::kTrain, Mode::kGlobal};
    }
    return {*mode_ == "TRAIN" ? Mode::kTrain : Mode::kEval};
  }
  // Why those modes, for MissingData.
  std::string ModeChoice() const {
    if (!mode_) return "mode unset: EVAL, else TRAIN, else GLOBAL steps are compared";
    if (*mode_ == "GLOBAL") return "mode 'GLOBAL': every step is compared by global step";
    return absl::StrCat("mode '", *mode_, "' compares only ", *mode_, " steps");
  }

  int64_t num_steps_;
  double diff_percent_, increase_percent_;
  absl::optional<std::string> mode_;
  absl::optional<Mode> active_;  // Unset mode: the mode being compared.
  std::map<std::pair<std::string, std::string>, Series> series_;
};

// --- Overfit --------------------------------------------------------------------
// Decisions: "mean validation loss" is the mean over one EVAL pass (the
// consecutive EVAL steps), "mean training loss" the mean over the training
// steps since the previous pass; a pass is judged when it ends (the next
// training step or the end of training). Training steps are TRAIN steps and
// GLOBAL ones (a hook never told its mode saves GLOBAL steps, and they train).
// ratio = (val - train) / train; `patience` consecutive passes with ratio >
// ratio_threshold fire (patience 1: the first). Steps before start_step
// (global step) are ignored. A non-positive training mean makes the ratio
// meaningless: that pass is skipped (train == 0 with val > 0 counts as an
// infinite ratio). Loss tensors: tensor_regex, else the 'losses' collection.
class Overfit : public SelectingRule {
 public:
  Overfit(TensorSelector selector, int64_t start_step, int64_t patience, double ratio_threshold)
      : SelectingRule("Overfit", std::move(selector)),
        start_step_(start_step),
        patience_(patience),
        ratio_threshold_(ratio_threshold) {}

  RuleVerdict OnTrainingEnd(const TrialInfo& info) override {
    if (in_eval_) {
      RuleVerdict v = ClosePass();
      if (v.kind != RuleVerdict::Kind::kContinue) return v;
    }
    return EvaluatingRule::OnTrainingEnd(info);
  }

 protected:
  RuleVerdict Evaluate(const Step& step, const TrialInfo& info) override {
    NoteSelected(step, info);
    absl::optional<double> loss = StepLoss(step, info, selector_);
    if (!loss) return RuleVerdict::Continue();
    if (step.global_step < start_step_) {
      ++before_start_;
      return RuleVerdict::Continue();
    }
    if (step.mode == Mode::kTrain || step.mode == Mode::kGlobal) {
      ++(step.mode == Mode::kTrain ? train_steps_ : global_steps_);
      if (in_eval_) {
        RuleVerdict v = ClosePass();
        if (v.kind != RuleVerdict::Kind::kContinue) return v;
      }
      train_sum_ += *loss;
      ++train_count_;
    } else if (step.mode == Mode::kEval) {
      ++eval_steps_;
      if (!in_eval_) {
        in_eval_ = true;
        pass_train_sum_ = train_sum_;
        pass_train_count_ = train_count_;
        train_sum_ = 0;
        train_count_ = 0;
      }
      eval_sum_ += *loss;
      ++eval_count_;
      last_eval_label_ = StepLabel(step);
    }
    return RuleVerdict::Continue();
  }

  std::string MissingData(const TrialInfo& info) const override {
    const std::string why = WhyUnusedSelection(info, "loss tensor");
    if (!why.empty()) return why;
    std::string out = absl::StrCat(
        "needs loss tensors (", selector_.Describe(),
        ") at training steps (TRAIN or GLOBAL) followed by EVAL steps (from step ", start_step_,
        "); found ", train_steps_, " TRAIN and ", eval_steps_, " EVAL steps with a loss");
    if (global_steps_ > 0) absl::StrAppend(&out, ", and ", global_steps_, " GLOBAL steps");
    if (before_start_ > 0) {
      absl::StrAppend(&out, "; ", before_start_, " steps with a loss came before start_step (",
                      start_step_, ")");
    }
    if (passes_without_training_ > 0) {
      absl::StrAppend(&out, "; ", passes_without_training_,
                      " EVAL passes had no training step with a loss before them");
    }
    if (passes_not_positive_ > 0) {
      absl::StrAppend(&out, "; ", passes_not_positive_,
                      " EVAL passes were skipped: their mean training loss was not positive");
    }
    return out;
  }

 private:
  RuleVerdict ClosePass() {
    in_eval_ = false;
    const double val = eval_sum_ / std::max<int64_t>(eval_count_, 1);
    const int64_t eval_count = eval_count_;
    eval_sum_ = 0;
    eval_count_ = 0;
    if (pass_train_count_ == 0 || eval_count == 0) {
      ++passes_without_training_;
      return RuleVerdict::Continue();
    }
    const double train = pass_train_sum_ / pass_train_count_;
    double ratio;
    if (train > 0) {
      ratio = (val - train) / train;
    } else if (train == 0 && val > 0) {
      ratio = std::numeric_limits<double>::infinity();
    } else {
      ++passes_not_positive_;
      return RuleVerdict::Continue();
    }
    ++evaluations_;
    ++steps_evaluated_;
    if (ratio > ratio_threshold_) {
      if (++exceeded_ >= patience_) {
        return RuleVerdict::Issues(Clip(absl::StrCat(
            last_eval_label_, ": mean validation loss ", Num(val), " over ", eval_count,
            " EVAL steps vs mean training loss ", Num(train), " over ", pass_train_count_,
            " training steps: (val - train) / train ", Num(ratio), " > ratio_threshold ",
            Num(ratio_threshold_), " for ", exceeded_, " evaluations (patience ", patience_, ")")));
      }
    } else {
      exceeded_ = 0;
    }
    return RuleVerdict::Continue();
  }

  int64_t start_step_, patience_;
  double ratio_threshold_;
  bool in_eval_ = false;
  double train_sum_ = 0, pass_train_sum_ = 0, eval_sum_ = 0;
  int64_t train_count_ = 0, pass_train_count_ = 0, eval_count_ = 0;
  int64_t exceeded_ = 0, train_steps_ = 0, global_steps_ = 0, eval_steps_ = 0;
  // Why steps with a loss did not count, for MissingData.
  int64_t before_start_ = 0, passes_without_training_ = 0, passes_not_positive_ = 0;
  std::string last_eval_label_;
};

// --- Overtraining ---------------------------------------------------------------
// Decisions: a loss value is a new optimum when it is below the best so far
// by more than `delta` (absolute, like Keras' min_delta). The rule fires when
// the training loss has not reached a new optimum for patience_train steps,
// or the validation loss (EVAL steps) for patience_validation steps: either
// way training goes on without improving. Training steps are TRAIN and
// GLOBAL steps (a hook never told its mode saves GLOBAL steps, and they
// train); PREDICT steps are not losses of either. Loss tensors: collection
// 'losses'.
class Overtraining : public SelectingRule {
 public:
  Overtraining(int64_t patience_train, int64_t patience_validation, double delta)
      : SelectingRule("Overtraining", Losses()),
        patience_train_(patience_train),
        patience_validation_(patience_validation),
        delta_(delta) {}

 protected:
  RuleVerdict Evaluate(const Step& step, const TrialInfo& info) override {
    NoteSelected(step, info);
    if (!selector_.Selects(step)) return RuleVerdict::Continue();
    absl::optional<double> loss = StepLoss(step, info, selector_);
    if (!loss) return RuleVerdict::Continue();
    const bool train = step.mode != Mode::kEval;
    Track& tr = train ? train_ : validation_;
    const int64_t patience = train ? patience_train_ : patience_validation_;
    ++evaluations_;
    ++steps_evaluated_;
    if (!tr.best || *loss < *tr.best - delta_) {
      tr.best = *loss;
      tr.best_label = absl::StrCat(ModeName(step.mode), " step ", step.mode_step);
      tr.since_best = 0;
      return RuleVerdict::Continue();
    }
    if (++tr.since_best >= patience) {
      return RuleVerdict::Issues(Clip(absl::StrCat(
          StepLabel(step), ": ", train ? "training" : "validation", " loss ", Num(*loss),
          " has not improved by more than delta ", Num(delta_), " on its best ", Num(*tr.best),
          " (", tr.best_label, ") for ", tr.since_best, " steps (",
          train ? "patience_train " : "patience_validation ", patience, ")")));
    }
    return RuleVerdict::Continue();
  }

  // Every loss with values at a selected step is evaluated.
  std::string MissingData(const TrialInfo& info) const override {
    return WhyUnusedSelection(info, "loss tensor");
  }

 private:
  struct Track {
    absl::optional<double> best;
    std::string best_label;  // "TRAIN step 3".
    int64_t since_best = 0;
  };
  // The training and the validation loss: collection 'losses' at TRAIN,
  // GLOBAL and EVAL steps.
  static TensorSelector Losses() {
    TensorSelector losses({"losses"}, {});
    losses.modes = {Mode::kTrain, Mode::kGlobal, Mode::kEval};
    return losses;
  }

  int64_t patience_train_, patience_validation_;
  double delta_;
  Track train_, validation_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Rule>> MakeLossNotDecreasing(RuleParameterReader& p,
                                                            const RuleContext&) {
  TensorSelector selector = TensorSelector::FromParameters(p);
  const bool use_losses = p.Bool("use_losses_collection", true);
  const int64_t num_steps = p.Int("num_steps", 10, 1);
  const double diff_percent = p.FloatExclusive("diff_percent", 0.1, 0, 100);
  const double increase = p.FloatExclusive("increase_threshold_percent", 5, 0, 100);
  absl::optional<std::string> mode;
  if (p.Has("mode"))
    mode = p.String("mode", "GLOBAL", {"EVAL", "TRAIN", "GLOBAL"});
  else
    p.OptionalString("mode");
  if (use_losses) selector.collections.push_back("losses");
  if (p.status().ok() && selector.empty()) {
    p.Fail("collection_names",
           "or 'tensor_regex' must be given when use_losses_collection is False");
  }
  if (absl::Status s = p.status(); !s.ok()) return s;
  return std::make_unique<LossNotDecreasing>(std::move(selector), num_steps, diff_percent, increase,
                                             std::move(mode));
}

absl::StatusOr<std::unique_ptr<Rule>> MakeOverfit(RuleParameterReader& p, const RuleContext&) {
  TensorSelector selector = TensorSelector::FromParameters(p, {.collection_names = false});
  if (selector.regexes.empty()) selector.collections = {"losses"};
  const int64_t start_step = p.Int("start_step", 0, 0);
  const int64_t patience = p.Int("patience", 1, 1);
  const double ratio_threshold = p.Float("ratio_threshold", 0.1, 0);
  if (absl::Status s = p.status(); !s.ok()) return s;
  return std::make_unique<Overfit>(std::move(selector), start_step, patience, ratio_threshold);
}

absl::StatusOr<std::unique_ptr<Rule>> MakeOvertraining(RuleParameterReader& p, const RuleContext&) {
  const int64_t patience_train = p.Int("patience_train", 5, 1);
  const int64_t patience_validation = p.Int("patience_validation", 10, 1);
  const double delta = p.Float("delta", 0.01, 0);
  if (absl::Status s = p.status(); !s.ok()) return s;
  return std::make_unique<Overtraining>(patience_train, patience_validation, delta);
}

}  // namespace debugplane::rules_engine::internal
