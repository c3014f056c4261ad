#include "rules_engine/step.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <regex>
#include <unordered_map>

#include "re2/re2.h"

namespace debugplane::rules_engine {
namespace {

// One compiled include_regex. smdebug's patterns are Python regexes matched
// with re.search; RE2 covers most of them, std::regex (ECMAScript, which has
// lookahead) covers "^(?!gradient).*bias" and the like.
struct CompiledPattern {
  std::unique_ptr<RE2> re2;
  std::unique_ptr<std::regex> fallback;  // Only when RE2 rejected the pattern.
  bool valid = false;                    // Neither accepted it: matches nothing.
};

// Process-wide cache: the same few patterns are tested for every tensor of
// every step, and compiling is far costlier than matching.
const CompiledPattern& Compile(const std::string& pattern) {
  static std::mutex mu;
  static auto* cache = new std::unordered_map<std::string, std::unique_ptr<CompiledPattern>>();
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = (*cache)[pattern];
  if (slot == nullptr) {
    slot = std::make_unique<CompiledPattern>();
    RE2::Options options;
    options.set_log_errors(false);
    auto re = std::make_unique<RE2>(pattern, options);
    if (re->ok()) {
      slot->re2 = std::move(re);
      slot->valid = true;
    } else {
      try {
        slot->fallback = std::make_unique<std::regex>(pattern, std::regex::ECMAScript);
        slot->valid = true;
      } catch (const std::regex_error&) {
        slot->valid = false;
      }
    }
  }
  return *slot;  // Entries are never erased, so the reference stays valid.
}

bool Search(const std::string& pattern, absl::string_view text) {
  const CompiledPattern& p = Compile(pattern);
  if (!p.valid) return false;
  if (p.re2 != nullptr)
    return RE2::PartialMatch(re2::StringPiece(text.data(), text.size()), *p.re2);
  try {
    return std::regex_search(text.begin(), text.end(), *p.fallback);
  } catch (const std::regex_error&) {
    return false;  // E.g. regex complexity limits on hostile patterns.
  }
}

}  // namespace

absl::string_view ModeName(Mode mode) {
  switch (mode) {
    case Mode::kTrain:
      return "TRAIN";
    case Mode::kEval:
      return "EVAL";
    case Mode::kPredict:
      return "PREDICT";
    case Mode::kGlobal:
      return "GLOBAL";
  }
  return "UNKNOWN";
}

const Tensor* Step::Find(absl::string_view name) const {
  // `tensors` is ordered by (name, worker): the first match is the first
  // worker's.
  auto it = std::lower_bound(tensors.begin(), tensors.end(), name,
                             [](const Tensor& t, absl::string_view n) { return t.name < n; });
  if (it != tensors.end() && it->name == name) return &*it;
  // Tolerate a Step assembled by hand in another order.
  for (const Tensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

uint64_t InstanceId::Next() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

bool TrialInfo::InCollection(absl::string_view name, absl::string_view tensor) const {
  if (membership_collections_ != collections.size()) {
    membership_.clear();
    membership_collections_ = collections.size();
  }
  auto outer = membership_.find(name);
  if (outer == membership_.end()) outer = membership_.try_emplace(std::string(name)).first;
  auto known = outer->second.find(tensor);
  if (known != outer->second.end()) return known->second;
  const bool member = [&] {
    auto it = collections.find(std::string(name));
    if (it == collections.end()) return false;
    const Collection& c = it->second;
    for (const std::string& t : c.tensor_names) {
      if (t == tensor) return true;
    }
    for (const std::string& pattern : c.include_regex) {
      if (Search(pattern, tensor)) return true;
    }
    return false;
  }();
  outer->second.emplace(std::string(tensor), member);
  return member;
}

}  // namespace debugplane::rules_engine
