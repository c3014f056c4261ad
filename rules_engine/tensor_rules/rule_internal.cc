// What the built-in tensor rules share (rule_internal.h): labels, number
// formatting, statistics and the tensor selection.

#include "rules_engine/tensor_rules/rule_internal.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <type_traits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/double2.h"
#include "base/message_text.h"

namespace debugplane::rules_engine::internal {

std::string StepLabel(const Step& step) {
  return absl::StrCat("step ", step.global_step, " (", ModeName(step.mode), " step ",
                      step.mode_step, ")");
}

std::string TensorLabel(const Tensor& tensor, const TrialInfo& info) {
  if (info.num_workers > 1 && !tensor.worker.empty()) {
    return absl::StrCat(tensor.name, " of ", tensor.worker);
  }
  return tensor.name;
}

std::string Num(double v) {
  // printf's %g keeps a NaN's sign bit ("-nan" for the 0/0 of x86), which
  // means nothing for a NaN and reads like a different value.
  if (std::isnan(v)) return "nan";
  return absl::StrFormat("%.6g", v);
}

std::string Clip(std::string details) {
  constexpr size_t kMax = 1024;
  if (details.size() > kMax) {
    details.resize(kMax - 3);
    details += "...";
  }
  return details;
}

double MeanAbs(const TensorValues& v) {
  if (v.empty()) return 0;
  const double sum = v.Visit([](const auto& r) {
    double s = 0;
    for (size_t i = 0; i < r.size(); ++i) s += std::fabs(r[i]);
    return s;
  });
  return sum / static_cast<double>(v.size());
}

double Mean(const TensorValues& v) {
  if (v.empty()) return 0;
  const double sum = v.Visit([](const auto& r) {
    double s = 0;
    for (size_t i = 0; i < r.size(); ++i) s += r[i];
    return s;
  });
  return sum / static_cast<double>(v.size());
}

double Variance(const TensorValues& v) {
  if (v.empty()) return 0;
  const double m = Mean(v);
  const double sum = v.Visit([m](const auto& r) {
    double s = 0;
    for (size_t i = 0; i < r.size(); ++i) s += (r[i] - m) * (r[i] - m);
    return s;
  });
  return sum / static_cast<double>(v.size());
}

BatchView ViewAsBatch(const Tensor& t) {
  BatchView view;
  const int64_t n = static_cast<int64_t>(t.values.size());
  if (t.shape.size() >= 2 && t.shape[0] > 0 && n % t.shape[0] == 0) {
    view.batch = t.shape[0];
    view.units = n / t.shape[0];
  } else {
    view.batch = 1;
    view.units = n;
  }
  return view;
}

RuleVerdict EvaluatingRule::OnTrainingEnd(const TrialInfo& info) {
  if (evaluations_ > 0) return RuleVerdict::NoIssues(Clip(Summary()));
  return RuleVerdict::Error(
      Clip(absl::StrCat(MissingData(info), "; ", DescribeTrial(info, steps_read_))));
}

std::string EvaluatingRule::Summary() const {
  return absl::StrCat("no issue in ", evaluations_, " evaluations over ", steps_evaluated_,
                      " steps");
}

TensorSelector TensorSelector::FromParameters(RuleParameterReader& p, const Parameters& how) {
  TensorSelector selector;
  if (how.collection_names) selector.collections = p.List("collection_names");
  selector.regexes = p.RegexList("tensor_regex", how.default_regex);
  selector.all_when_empty = how.all_when_empty;
  return selector;
}

bool TensorSelector::Matches(const std::string& tensor, const TrialInfo& info) const {
  if (empty()) return all_when_empty;
  if (memo_instance_ != info.instance() || memo_collections_ != info.collections.size()) {
    memo_.clear();
    memo_index_.clear();
    memo_next_ = 0;
    memo_instance_ = info.instance();
    memo_collections_ = info.collections.size();
  }
  if (memo_next_ < memo_.size() && memo_[memo_next_].first == tensor) {
    return memo_[memo_next_++].second;
  }
  auto it = memo_index_.find(tensor);
  if (it == memo_index_.end()) {
    it = memo_index_.emplace(tensor, memo_.size()).first;
    memo_.emplace_back(tensor, Compute(tensor, info));
  }
  memo_next_ = it->second + 1;
  return memo_[it->second].second;
}

bool TensorSelector::Compute(const std::string& tensor, const TrialInfo& info) const {
  for (const std::string& n : names) {
    if (n == tensor) return true;
  }
  for (const std::string& c : collections) {
    if (info.InCollection(c, tensor)) return true;
  }
  for (const std::string& r : regexes) {
    if (RegexMatchPrefix(r, tensor)) return true;
  }
  return false;
}

bool TensorSelector::Selects(const Step& step) const {
  return modes.empty() || std::find(modes.begin(), modes.end(), step.mode) != modes.end();
}

std::string TensorSelector::Describe() const {
  if (empty()) return all_when_empty ? "any tensor" : "no tensor";
  std::vector<std::string> parts;
  for (const std::string& n : names) parts.push_back(absl::StrCat("tensor '", n, "'"));
  for (const std::string& r : regexes) parts.push_back(absl::StrCat("tensor_regex '", r, "'"));
  for (const std::string& c : collections) parts.push_back(absl::StrCat("collection '", c, "'"));
  return absl::StrJoin(parts, " or ");
}

namespace {

// Two doubles (two 64-bit integers) per operation (base/double2.h). Four
// independent accumulators keep the adds out of one dependency chain.
using base::Double2;
using base::Int2;
using base::LoadDouble2;

}  // namespace

namespace {

// The scans over n doubles at `v` (any alignment: loaded with memcpy).
int64_t CountZeroDoubles(const char* bytes, size_t n) {
  const Double2 zero = {0, 0};
  Int2 c0 = {0, 0}, c1 = c0, c2 = c0, c3 = c0;
  const auto at = [bytes](size_t i) { return LoadDouble2(bytes + i * sizeof(double)); };
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    // A comparison gives -1 (all bits set) per equal lane.
    c0 -= at(i) == zero;
    c1 -= at(i + 2) == zero;
    c2 -= at(i + 4) == zero;
    c3 -= at(i + 6) == zero;
  }
  const Int2 c = c0 + c1 + c2 + c3;
  int64_t zeros = c[0] + c[1];
  const DoubleElements tail{bytes, n};
  for (; i < n; ++i) zeros += tail[i] == 0 ? 1 : 0;
  return zeros;
}

bool AllFiniteDoubles(const char* bytes, size_t n) {
  // x - x is 0 for a finite x and NaN for NaN and +-inf; NaN sticks in a sum.
  Double2 a0 = {0, 0}, a1 = a0, a2 = a0, a3 = a0;
  const auto at = [bytes](size_t i) { return LoadDouble2(bytes + i * sizeof(double)); };
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const Double2 x0 = at(i), x1 = at(i + 2), x2 = at(i + 4), x3 = at(i + 6);
    a0 += x0 - x0;
    a1 += x1 - x1;
    a2 += x2 - x2;
    a3 += x3 - x3;
  }
  const Double2 a = a0 + a1 + a2 + a3;
  double sum = a[0] + a[1];
  const DoubleElements tail{bytes, n};
  for (; i < n; ++i) sum += tail[i] - tail[i];
  return sum == 0;
}

}  // namespace

int64_t CountZeros(const std::vector<double>& values) {
  return CountZeroDoubles(reinterpret_cast<const char*>(values.data()), values.size());
}

bool AllFinite(const std::vector<double>& values) {
  return AllFiniteDoubles(reinterpret_cast<const char*>(values.data()), values.size());
}

int64_t CountZeros(const TensorValues& values) {
  return values.Visit([](const auto& r) -> int64_t {
    if constexpr (std::is_same_v<std::decay_t<decltype(r)>, DoubleElements>) {
      return CountZeroDoubles(r.data, r.count);
    } else {
      int64_t zeros = 0;
      for (size_t i = 0; i < r.size(); ++i) zeros += r[i] == 0 ? 1 : 0;
      return zeros;
    }
  });
}

bool AllFinite(const TensorValues& values) {
  return values.Visit([](const auto& r) -> bool {
    if constexpr (std::is_same_v<std::decay_t<decltype(r)>, DoubleElements>) {
      return AllFiniteDoubles(r.data, r.count);
    } else {
      for (size_t i = 0; i < r.size(); ++i) {
        if (!std::isfinite(r[i])) return false;
      }
      return true;
    }
  });
}

int64_t CountZeros(const Tensor& t) { return t.facts ? t.facts->zeros : CountZeros(t.values); }

bool AllFinite(const Tensor& t) { return t.facts ? t.facts->all_finite : AllFinite(t.values); }

RuleVerdict SelectingRule::CheckSelected(const Step& step, const TrialInfo& info,
                                         TensorCheck check) {
  const bool mode_selected = selector_.Selects(step);
  bool any = false;
  for (const Tensor& t : step.tensors) {
    if (!selector_.Matches(t.name, info)) continue;
    seen_.Note(step, t);
    if (!mode_selected || (t.values.empty() && !(accepts_histograms_ && t.histogram))) continue;
    absl::optional<std::string> issue = check(t);
    if (!issue.has_value()) continue;  // Not evaluated.
    any = true;
    ++evaluations_;
    if (!issue->empty()) {
      return RuleVerdict::Issues(
          Clip(absl::StrCat(StepLabel(step), ": ", TensorLabel(t, info), " ", *issue)));
    }
  }
  if (any) ++steps_evaluated_;
  return RuleVerdict::Continue();
}

void SelectingRule::NoteSelected(const Step& step, const TrialInfo& info) {
  for (const Tensor& t : step.tensors) {
    if (selector_.Matches(t.name, info)) seen_.Note(step, t);
  }
}

std::vector<std::reference_wrapper<const Tensor>> SelectingRule::NoteWantedWithValues(
    const Step& step, const TrialInfo& info) {
  std::vector<std::reference_wrapper<const Tensor>> with_values;
  for (const Tensor& t : step.tensors) {
    if (!Wants(t.name, info)) continue;
    seen_.Note(step, t);
    if (!t.values.empty()) with_values.push_back(t);
  }
  return with_values;
}

std::string SelectingRule::WhyUnusedSelection(const TrialInfo& info, absl::string_view what) const {
  return WhyUnused(what.empty() ? "tensor" : what, selector_.empty() ? "" : selector_.Describe(),
                   seen_, steps_read(), selector_.modes, info, selector_.collections);
}

// --- What a rule was given ---------------------------------------------------------

std::string QuoteName(absl::string_view name) {
  return absl::StrCat("'", base::EscapeForMessage(name, 40), "'");
}

std::string Times(int64_t n) { return n == 1 ? "once" : absl::StrCat(n, " times"); }

std::string ListNames(const std::vector<std::string>& names, size_t total, size_t max) {
  const size_t shown = std::min(names.size(), max);
  std::string out;
  for (size_t i = 0; i < shown; ++i) absl::StrAppend(&out, i > 0 ? ", " : "", QuoteName(names[i]));
  if (total > shown) absl::StrAppend(&out, " and ", total - shown, " more");
  return out;
}

int64_t ModeCounts::Of(const std::vector<Mode>& modes) const {
  if (modes.empty()) return Total();
  int64_t n = 0;
  for (Mode m : modes) n += Of(m);
  return n;
}

int64_t ModeCounts::Total() const { return counts_[0] + counts_[1] + counts_[2] + counts_[3]; }

namespace {

constexpr Mode kModes[] = {Mode::kTrain, Mode::kEval, Mode::kPredict, Mode::kGlobal};

// "60 TRAIN steps", "1 EVAL step".
std::string CountOf(int64_t n, absl::string_view mode) {
  return absl::StrCat(n, " ", mode, n == 1 ? " step" : " steps");
}

// "a", "a and b", "a, b and c".
std::string JoinAnd(const std::vector<std::string>& parts) {
  if (parts.size() <= 1) return parts.empty() ? "" : parts[0];
  return absl::StrCat(absl::StrJoin(std::vector<std::string>(parts.begin(), parts.end() - 1), ", "),
                      " and ", parts.back());
}

}  // namespace

std::string ModeCounts::Describe() const {
  std::vector<std::string> parts;
  for (Mode m : kModes) {
    if (Of(m) > 0) parts.push_back(CountOf(Of(m), ModeName(m)));
  }
  return parts.empty() ? "no step" : JoinAnd(parts);
}

std::string ModeCounts::DescribeAgainst(const std::vector<Mode>& modes) const {
  if (modes.empty()) return Describe();
  std::vector<std::string> parts;
  for (Mode m : kModes) {
    if (Of(m) > 0 && std::find(modes.begin(), modes.end(), m) == modes.end()) {
      parts.push_back(CountOf(Of(m), ModeName(m)));
    }
  }
  parts.push_back(CountOf(Of(modes), ModesName(modes)));
  return JoinAnd(parts);
}

std::string ModesName(const std::vector<Mode>& modes) {
  std::vector<absl::string_view> names;
  for (Mode m : modes) names.push_back(ModeName(m));
  return absl::StrJoin(names, "/");
}

void SelectionSeen::Note(const Step& step, const Tensor& tensor) {
  if (tensor.values.empty() && !tensor.histogram) {
    ++without_values_;
  } else if (!counted_any_ || step.global_step != last_counted_step_) {
    steps_.Add(step.mode);
    last_counted_step_ = step.global_step;
    counted_any_ = true;
  }
  if (more_names_) return;
  if (next_name_ < names_.size() && names_[next_name_] == tensor.name) {
    ++next_name_;
    return;
  }
  if (auto it = std::find(names_.begin(), names_.end(), tensor.name); it != names_.end()) {
    next_name_ = static_cast<size_t>(it - names_.begin()) + 1;
    return;
  }
  if (names_.size() < kMaxListedNames) {
    names_.push_back(tensor.name);
    next_name_ = names_.size();
  } else {
    more_names_ = true;
  }
}

std::string SelectionSeen::Names() const {
  std::string out = ListNames(names_, names_.size());
  if (more_names_) absl::StrAppend(&out, " and more");
  return out;
}

std::string SelectionSeen::NamesWere() const {
  return absl::StrCat(Names(), names_.size() == 1 && !more_names_ ? " was" : " were");
}

std::string TrialTensors(const TrialInfo& info) {
  if (info.collections.empty()) return "the trial has no collections file";
  std::set<std::string> names;
  for (const auto& [name, c] : info.collections)
    names.insert(c.tensor_names.begin(), c.tensor_names.end());
  if (names.empty()) return "the trial's collections file lists no tensor names";
  std::vector<std::string> first;
  for (const std::string& n : names) {
    if (first.size() == kMaxListedNames) break;
    first.push_back(n);
  }
  return absl::StrCat("the trial has ", names.size(), names.size() == 1 ? " tensor" : " tensors",
                      " (by its collections file): ", ListNames(first, names.size()));
}

std::string CollectionNotes(const std::vector<std::string>& collections, const TrialInfo& info) {
  if (info.collections.empty()) return "";
  // smdebug records the tensors it saved in their collections: when the file
  // lists some, a collection listing none saved nothing.
  bool file_lists_names = false;
  for (const auto& [name, c] : info.collections) {
    file_lists_names = file_lists_names || !c.tensor_names.empty();
  }
  std::vector<std::string> notes;
  std::vector<std::string> pattern_errors;
  bool patterns_listed = false;
  for (const std::string& name : collections) {
    auto it = info.collections.find(name);
    if (it == info.collections.end()) {
      notes.push_back(absl::StrCat("collection ", QuoteName(name), " is not saved by the hook"));
      continue;
    }
    if (it->second.include_regex.empty() && it->second.tensor_names.empty()) {
      notes.push_back(absl::StrCat("collection ", QuoteName(name),
                                   " has neither include_regex nor tensor names"));
    } else if (file_lists_names && it->second.tensor_names.empty()) {
      notes.push_back(absl::StrCat("collection ", QuoteName(name),
                                   " lists no tensor: the hook saved none of it"));
    }
    if (!patterns_listed) {
      pattern_errors = info.CollectionPatternErrors();
      patterns_listed = true;
    }
    const std::string prefix = absl::StrCat("collection ", QuoteName(name), ":");
    for (const std::string& e : pattern_errors) {
      if (absl::StartsWith(e, prefix)) notes.push_back(e);
    }
  }
  if (notes.empty()) return "";
  return absl::StrCat(" (", absl::StrJoin(notes, "; "), ")");
}

std::string WhyUnused(absl::string_view what, absl::string_view selection,
                      const SelectionSeen& seen, const ModeCounts& steps,
                      const std::vector<Mode>& modes, const TrialInfo& info,
                      const std::vector<std::string>& collections) {
  const std::string selected =
      selection.empty() ? std::string() : absl::StrCat(" (", selection, ")");
  if (steps.Total() == 0) {
    return absl::StrCat("no step was read (the rule needs a ", what, selected, ")");
  }
  if (!seen.any()) {
    std::string out = absl::StrCat("no ", what, " was saved", selected, "; ", TrialTensors(info),
                                   CollectionNotes(collections, info));
    if (!modes.empty() && steps.Of(modes) == 0) {
      absl::StrAppend(&out, "; besides, the rule reads ", ModesName(modes),
                      " steps and the trial has ", steps.DescribeAgainst(modes));
    }
    return out;
  }
  if (!modes.empty() && seen.steps().Total() > 0 && seen.steps().Of(modes) == 0) {
    return absl::StrCat("no ", what, selected, " at a ", ModesName(modes),
                        " step, the steps the rule reads: ", seen.NamesWere(), " saved at ",
                        seen.steps().Describe(), " only; the trial has ",
                        steps.DescribeAgainst(modes));
  }
  if (seen.steps().Total() == 0) {
    return absl::StrCat("every ", what, selected, " was saved without values (",
                        Times(seen.without_values()),
                        ": a string dtype or an empty shape): ", seen.Names());
  }
  return "";
}

std::string DescribeTrial(const TrialInfo& info, const ModeCounts& steps) {
  std::string out = absl::StrCat("read ", steps.Describe(), "; ");
  if (info.collections.empty()) {
    absl::StrAppend(&out, "the trial has no collections file");
    return out;
  }
  std::vector<std::string> parts;
  for (const auto& [name, c] : info.collections) {
    if (parts.size() == kMaxListedNames) break;
    parts.push_back(
        absl::StrCat(base::EscapeForMessage(name, 40), " (", c.tensor_names.size(), ")"));
  }
  absl::StrAppend(&out, "collections saved (tensor count): ", absl::StrJoin(parts, ", "));
  if (info.collections.size() > parts.size()) {
    absl::StrAppend(&out, " and ", info.collections.size() - parts.size(), " more");
  }
  return out;
}

}  // namespace debugplane::rules_engine::internal
