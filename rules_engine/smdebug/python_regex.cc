#include "rules_engine/smdebug/python_regex.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/message_text.h"
#include "re2/re2.h"

namespace debugplane::rules_engine {
namespace {

// Longest excerpt of RE2's error in a message (its argument can be the rest
// of the pattern).
constexpr size_t kMaxErrorChars = 100;

// After the '[' that opens a character class at `pos`: the position after
// its closing ']'. A ']' first in the class (after an optional '^') is a
// literal, as in Python; so is an escaped one.
size_t SkipClass(absl::string_view pattern, size_t pos) {
  if (pos < pattern.size() && pattern[pos] == '^') ++pos;
  if (pos < pattern.size() && pattern[pos] == ']') ++pos;
  while (pos < pattern.size()) {
    const char c = pattern[pos++];
    if (c == '\\') {
      ++pos;
    } else if (c == ']') {
      break;
    }
  }
  return pos;
}

// Finds the first negative lookahead outside any group: pattern[*open] is
// its '(' and pattern[*close] its ')'. Escapes and character classes hold
// no group syntax. False when there is none, when parentheses do not
// balance, or when '|' occurs outside groups (in Python "x(?!a)y|z" means
// "(x(?!a)y)|z", which the split into X, A and Y cannot express).
bool FindTopLevelNegativeLookahead(absl::string_view pattern, size_t* open, size_t* close) {
  int depth = 0;
  bool opened = false, closed = false;
  size_t pos = 0;
  while (pos < pattern.size()) {
    const char c = pattern[pos];
    if (c == '\\') {
      pos += 2;
      continue;
    }
    if (c == '[') {
      pos = SkipClass(pattern, pos + 1);
      continue;
    }
    if (c == '|' && depth == 0) return false;
    if (c == '(') {
      if (depth == 0 && !opened && pattern.substr(pos, 3) == "(?!") {
        opened = true;
        *open = pos;
      }
      ++depth;
    } else if (c == ')') {
      if (--depth < 0) return false;
      if (depth == 0 && opened && !closed) {
        closed = true;
        *close = pos;
      }
    }
    ++pos;
  }
  return closed && depth == 0;
}

RE2::Options CompileOptions() {
  RE2::Options options;
  options.set_log_errors(false);  // Errors are returned to whoever sent the pattern.
  options.set_max_mem(kRegexMaxMemBytes);
  return options;
}

absl::Status RefusedBy(const RE2& re) {
  std::string message = base::EscapeForMessage(re.error(), kMaxErrorChars);
  if (re.error_code() == RE2::ErrorBadPerlOp || re.error_code() == RE2::ErrorBadNamedCapture) {
    absl::StrAppend(&message,
                    " (RE2 syntax: no lookarounds or backreferences; of Python's lookarounds "
                    "only one negative lookahead outside groups, as in ^(?!gradient).*weight, "
                    "is supported, with no | outside groups)");
  }
  return absl::InvalidArgumentError(message);
}

}  // namespace

PythonRegex::PythonRegex() = default;
PythonRegex::~PythonRegex() = default;

absl::StatusOr<std::unique_ptr<const PythonRegex>> PythonRegex::Compile(absl::string_view pattern) {
  if (pattern.size() > kMaxRegexPatternBytes) {
    return absl::InvalidArgumentError(absl::StrCat("is ", pattern.size(), " bytes long; at most ",
                                                   kMaxRegexPatternBytes, " are allowed"));
  }
  const RE2::Options options = CompileOptions();
  std::unique_ptr<PythonRegex> regex(new PythonRegex());
  auto whole = std::make_unique<RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
  if (whole->ok()) {
    regex->whole_ = std::move(whole);
    return std::unique_ptr<const PythonRegex>(std::move(regex));
  }
  size_t open = 0, close = 0;
  if (!FindTopLevelNegativeLookahead(pattern, &open, &close)) return RefusedBy(*whole);
  const absl::string_view before = pattern.substr(0, open);
  const absl::string_view excluded = pattern.substr(open + 3, close - open - 3);
  const absl::string_view after = pattern.substr(close + 1);
  auto compile = [&options](absl::string_view part) {
    return std::make_unique<RE2>(re2::StringPiece(part.data(), part.size()), options);
  };
  regex->before_ending_ = compile(absl::StrCat("(?:", before, ")$"));
  regex->before_spanning_ = compile(absl::StrCat("^(?:", before, ")$"));
  regex->excluded_ = compile(excluded);
  regex->after_ = compile(after);
  for (const RE2* part : {regex->before_ending_.get(), regex->before_spanning_.get(),
                          regex->excluded_.get(), regex->after_.get()}) {
    if (!part->ok()) return RefusedBy(*part);
  }
  return std::unique_ptr<const PythonRegex>(std::move(regex));
}

bool PythonRegex::LookaheadMatchesAt(absl::string_view text, size_t split, bool from_start) const {
  // X sees the text up to the split ("(?:X)$": X ends there; a "\b" at the
  // very end of X therefore always holds, a small departure from Python); A
  // and Y see the whole text from the split, so "^", "$" and "\b" in them
  // keep their meaning.
  // Python splits between characters, never inside one.
  if (split < text.size() && (static_cast<unsigned char>(text[split]) & 0xC0) == 0x80) {
    return false;
  }
  const RE2& before = from_start ? *before_spanning_ : *before_ending_;
  if (!before.Match(re2::StringPiece(text.data(), split), 0, split, RE2::UNANCHORED, nullptr, 0)) {
    return false;
  }
  const re2::StringPiece whole(text.data(), text.size());
  if (excluded_->Match(whole, split, text.size(), RE2::ANCHOR_START, nullptr, 0)) return false;
  return after_->Match(whole, split, text.size(), RE2::ANCHOR_START, nullptr, 0);
}

bool PythonRegex::MatchPrefix(absl::string_view text) const {
  return Matches(text, /*from_start=*/true);
}

bool PythonRegex::Search(absl::string_view text) const {
  return Matches(text, /*from_start=*/false);
}

bool PythonRegex::Matches(absl::string_view text, bool from_start) const {
  if (whole_ != nullptr) {
    return whole_->Match(re2::StringPiece(text.data(), text.size()), 0, text.size(),
                         from_start ? RE2::ANCHOR_START : RE2::UNANCHORED, nullptr, 0);
  }
  // Every split point: Python backtracks through all of them too. O(n^2)
  // for a name of n bytes; names are short and answers are memoized.
  for (size_t split = 0; split <= text.size(); ++split) {
    if (LookaheadMatchesAt(text, split, from_start)) return true;
  }
  return false;
}

RegexCache::RegexCache(Limits limits) : limits_(limits) {}

RegexCache& RegexCache::Shared() {
  static RegexCache* const cache = new RegexCache(Limits{});
  return *cache;
}

absl::StatusOr<std::shared_ptr<const PythonRegex>> RegexCache::Get(absl::string_view pattern) {
  {
    absl::MutexLock lock(&mu_);
    if (auto it = index_.find(pattern); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->regex;
    }
  }
  // Compiled without the lock: a long pattern does not stall other rules.
  absl::StatusOr<std::unique_ptr<const PythonRegex>> compiled = PythonRegex::Compile(pattern);
  if (!compiled.ok()) return compiled.status();  // Refused: never cached.
  std::shared_ptr<const PythonRegex> regex = *std::move(compiled);
  if (pattern.size() > limits_.max_pattern_bytes || limits_.max_entries == 0) return regex;

  absl::MutexLock lock(&mu_);
  if (auto it = index_.find(pattern); it != index_.end()) {  // Another thread was faster.
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->regex;
  }
  lru_.push_front(Entry{std::string(pattern), regex});
  index_.emplace(lru_.front().pattern, lru_.begin());
  pattern_bytes_ += pattern.size();
  EvictToLimitsLocked();
  return regex;
}

void RegexCache::EvictToLimitsLocked() {
  while (!lru_.empty() &&
         (lru_.size() > limits_.max_entries || pattern_bytes_ > limits_.max_pattern_bytes)) {
    const Entry& oldest = lru_.back();
    index_.erase(absl::string_view(oldest.pattern));
    pattern_bytes_ -= oldest.pattern.size();
    lru_.pop_back();
  }
}

size_t RegexCache::entries() const {
  absl::MutexLock lock(&mu_);
  return lru_.size();
}

size_t RegexCache::pattern_bytes() const {
  absl::MutexLock lock(&mu_);
  return pattern_bytes_;
}

}  // namespace debugplane::rules_engine
