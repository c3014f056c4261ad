// smdebug's regular expressions (Python `re` patterns: rule parameters such
// as tensor_regex, and the include_regex of the trial's collections files),
// compiled with RE2 only, and a bounded cache of compiled patterns.
//
// Why RE2 only: these patterns come from requests and from files the
// training writes. RE2 matches in linear time, its parser and compiler use
// explicit stacks and it works within a memory budget, so no pattern can
// exhaust the stack, the heap or the CPU. (std::regex recurses per group
// and per character and overflowed the stack on hostile patterns.)
//
// RE2 has no lookaround. smdebug's default collections use one negative
// lookahead each: "^(?!gradient).*weight" (weights: names matching .*weight
// that do not start with "gradient") and, for PyTorch,
// "[Ll]oss_(?!input).*output" (losses). So exactly that construct is
// supported: one negative lookahead outside any group, X(?!A)Y, with no '|'
// outside groups. It matches where X ends at a position p (X compiled as
// "(?:X)$" against the text up to p), A does not match at p and Y does.
// Any other pattern RE2 refuses is refused.

#ifndef DEBUGPLANE_RULES_ENGINE_SMDEBUG_PYTHON_REGEX_H_
#define DEBUGPLANE_RULES_ENGINE_SMDEBUG_PYTHON_REGEX_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace re2 {
class RE2;
}  // namespace re2

namespace debugplane::rules_engine {

// Longest pattern compiled, in bytes. Request values are at most 256
// characters (1 KiB of UTF-8); collections files hold smdebug's short
// patterns and the hook's CollectionParameters values (also request values).
inline constexpr size_t kMaxRegexPatternBytes = 4096;
// RE2's memory budget per compiled pattern (its program and its DFA
// caches; RE2's default is 8 MiB). A pattern whose program does not fit is
// refused ("pattern too large - compile failed"); a DFA that fills its
// share is reset or falls back to RE2's NFA, still in linear time.
inline constexpr int64_t kRegexMaxMemBytes = 512 << 10;

// One compiled pattern. Immutable once compiled: thread-safe.
class PythonRegex {
 public:
  // Compiles `pattern`. INVALID_ARGUMENT when it is longer than
  // kMaxRegexPatternBytes (nothing is compiled) or RE2 refuses it; the
  // message is RE2's error (for X(?!A)Y, that of the part RE2 refused), cut
  // to a short excerpt, e.g. "invalid perl operator: (?<" (with a note on
  // lookarounds) or "missing ): ((a".
  static absl::StatusOr<std::unique_ptr<const PythonRegex>> Compile(absl::string_view pattern);

  ~PythonRegex();
  PythonRegex(const PythonRegex&) = delete;
  PythonRegex& operator=(const PythonRegex&) = delete;

  // Python re.match: a match that starts at the beginning of `text` (it
  // need not reach its end). How smdebug applies tensor_regex.
  // Linear in `text` for RE2's patterns; X(?!A)Y tries every split point
  // (quadratic, as Python's backtracking is at best; tensor names are short).
  bool MatchPrefix(absl::string_view text) const;
  // Python re.search: a match anywhere in `text`. How smdebug applies a
  // collection's include_regex. Cost as MatchPrefix.
  bool Search(absl::string_view text) const;

 private:
  PythonRegex();

  // Whether X(?!A)Y matches with X ending at `split` (and, for MatchPrefix,
  // starting at 0).
  bool LookaheadMatchesAt(absl::string_view text, size_t split, bool from_start) const;
  // MatchPrefix (`from_start`) or Search.
  bool Matches(absl::string_view text, bool from_start) const;

  // The whole pattern when RE2 accepts it; null for X(?!A)Y.
  std::unique_ptr<re2::RE2> whole_;
  // X(?!A)Y: "(?:X)$" and "^(?:X)$" (X ending, or spanning, the text given),
  // A and Y (both matched at the split, in the whole text's context).
  std::unique_ptr<re2::RE2> before_ending_;
  std::unique_ptr<re2::RE2> before_spanning_;
  std::unique_ptr<re2::RE2> excluded_;
  std::unique_ptr<re2::RE2> after_;
};

// A process-wide cache of compiled patterns, bounded in entries and in
// pattern bytes; the least recently used entries are evicted first. Refused
// patterns are never cached (their error is computed again on each Get, at
// a cost bounded by kMaxRegexPatternBytes). Thread-safe. The memory of the
// compiled patterns is at most about max_entries * kRegexMaxMemBytes.
class RegexCache {
 public:
  struct Limits {
    size_t max_entries = 256;
    // Sum of the cached patterns' sizes, in bytes.
    size_t max_pattern_bytes = 256 << 10;
  };

  explicit RegexCache(Limits limits);
  RegexCache(const RegexCache&) = delete;
  RegexCache& operator=(const RegexCache&) = delete;

  // The cache shared by the rules and the trial readers (default limits).
  static RegexCache& Shared();

  // The compiled `pattern` (from the cache, or compiled now and cached),
  // or PythonRegex::Compile's error. Compiling happens outside the lock.
  // The returned pattern stays valid after it is evicted.
  absl::StatusOr<std::shared_ptr<const PythonRegex>> Get(absl::string_view pattern);

  size_t entries() const;
  size_t pattern_bytes() const;

 private:
  struct Entry {
    std::string pattern;
    std::shared_ptr<const PythonRegex> regex;
  };
  using LruList = std::list<Entry>;  // Most recently used first.

  void EvictToLimitsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Limits limits_;
  mutable absl::Mutex mu_;
  LruList lru_ ABSL_GUARDED_BY(mu_);
  // Keys view the pattern stored in their entry of lru_.
  absl::flat_hash_map<absl::string_view, LruList::iterator> index_ ABSL_GUARDED_BY(mu_);
  size_t pattern_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_SMDEBUG_PYTHON_REGEX_H_
