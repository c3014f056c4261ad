#include "rules_engine/smdebug/step.h"

#include <algorithm>
#include <atomic>
#include <iterator>
#include <memory>

#include "absl/strings/str_cat.h"
#include "base/message_text.h"
#include "rules_engine/smdebug/python_regex.h"
#include "spdlog/spdlog.h"

namespace debugplane::rules_engine {

absl::string_view ModeName(Mode mode) {
  // Indexed by the mode's value (1 to 4).
  static constexpr absl::string_view kNames[] = {"UNKNOWN", "TRAIN", "EVAL", "PREDICT", "GLOBAL"};
  const auto index = static_cast<size_t>(mode);
  return index < std::size(kNames) ? kNames[index] : "UNKNOWN";
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
      if (std::shared_ptr<const PythonRegex> regex = IncludeRegex(it->first, pattern)) {
        if (regex->Search(tensor)) return true;
      }
    }
    return false;
  }();
  outer->second.emplace(std::string(tensor), member);
  return member;
}

std::shared_ptr<const PythonRegex> TrialInfo::IncludeRegex(absl::string_view collection,
                                                           const std::string& pattern) const {
  // Refused patterns are remembered here (the shared cache keeps only
  // compiled ones): the rules ask about every tensor name.
  if (refused_include_regexes_.contains(pattern)) return nullptr;
  absl::StatusOr<std::shared_ptr<const PythonRegex>> compiled = RegexCache::Shared().Get(pattern);
  if (compiled.ok()) return *std::move(compiled);
  refused_include_regexes_.insert(pattern);
  spdlog::warn("collection '{}': include_regex {} cannot be used (it matches nothing): {}",
               base::EscapeForMessage(collection), base::SingleQuoteForMessage(pattern),
               std::string(compiled.status().message()));
  return nullptr;
}

std::vector<std::string> TrialInfo::CollectionPatternErrors() const {
  std::vector<std::string> errors;
  for (const auto& [name, collection] : collections) {
    for (const std::string& pattern : collection.include_regex) {
      absl::StatusOr<std::shared_ptr<const PythonRegex>> compiled =
          RegexCache::Shared().Get(pattern);
      if (compiled.ok()) continue;
      errors.push_back(
          absl::StrCat("collection '", base::EscapeForMessage(name), "': include_regex ",
                       base::SingleQuoteForMessage(pattern),
                       " cannot be used (it matches nothing): ", compiled.status().message()));
    }
  }
  return errors;
}

}  // namespace debugplane::rules_engine
