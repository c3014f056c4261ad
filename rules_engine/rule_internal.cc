// The tensor selection shared by the built-in rules (rule_internal.h).

#include "rules_engine/rule_internal.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace debugplane::rules_engine::internal {

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

// Two doubles (two 64-bit integers) per operation: GCC and Clang vector
// extensions, which compile to SSE2 / NEON without target-specific code.
// Four independent accumulators keep the adds out of one dependency chain.
typedef double Double2 __attribute__((vector_size(16)));
typedef int64_t Int2 __attribute__((vector_size(16)));

Double2 Load2(const double* p) {
  Double2 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

}  // namespace

int64_t CountZeros(const std::vector<double>& values) {
  const double* v = values.data();
  const size_t n = values.size();
  const Double2 zero = {0, 0};
  Int2 c0 = {0, 0}, c1 = c0, c2 = c0, c3 = c0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    // A comparison gives -1 (all bits set) per equal lane.
    c0 -= Load2(v + i) == zero;
    c1 -= Load2(v + i + 2) == zero;
    c2 -= Load2(v + i + 4) == zero;
    c3 -= Load2(v + i + 6) == zero;
  }
  const Int2 c = c0 + c1 + c2 + c3;
  int64_t zeros = c[0] + c[1];
  for (; i < n; ++i) zeros += v[i] == 0 ? 1 : 0;
  return zeros;
}

bool AllFinite(const std::vector<double>& values) {
  // x - x is 0 for a finite x and NaN for NaN and +-inf; NaN sticks in a sum.
  const double* v = values.data();
  const size_t n = values.size();
  Double2 a0 = {0, 0}, a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const Double2 x0 = Load2(v + i), x1 = Load2(v + i + 2), x2 = Load2(v + i + 4),
                  x3 = Load2(v + i + 6);
    a0 += x0 - x0;
    a1 += x1 - x1;
    a2 += x2 - x2;
    a3 += x3 - x3;
  }
  const Double2 a = a0 + a1 + a2 + a3;
  double sum = a[0] + a[1];
  for (; i < n; ++i) sum += v[i] - v[i];
  return sum == 0;
}

RuleVerdict SelectingRule::CheckSelected(const Step& step, const TrialInfo& info,
                                         TensorCheck check) {
  if (!selector_.Selects(step)) return RuleVerdict::Continue();
  bool any = false;
  for (const Tensor& t : step.tensors) {
    if (t.values.empty() || !selector_.Matches(t.name, info)) continue;
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

}  // namespace debugplane::rules_engine::internal
