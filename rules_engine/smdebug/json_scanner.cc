#include "rules_engine/smdebug/json_scanner.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/message_text.h"
#include "base/utf8.h"

namespace debugplane::rules_engine {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// std::from_chars of the number at [p, end): its end, or nullptr. Out of
// double's range (libstdc++ also says so for subnormals): strtod's answer,
// as nlohmann gives it (+-0 or the subnormal), and nullptr for +-inf (which
// nlohmann refuses: "number overflow"). Correctly rounded, like
// ParseJsonNumberFast's answers.
const char* FromChars(const char* p, const char* end, double* value) {
  auto parsed = std::from_chars(p, end, *value);
  if (parsed.ec == std::errc::result_out_of_range) {
    *value = std::strtod(std::string(p, parsed.ptr).c_str(), nullptr);
    return std::isfinite(*value) ? parsed.ptr : nullptr;
  }
  return parsed.ec == std::errc() ? parsed.ptr : nullptr;
}

// Where and why a number failed.
struct NumberError {
  const char* at = nullptr;
  const char* cause = "";
};

// The number at [p, end) (see ParseJsonNumber); nullptr with *error set if
// the bytes there are not one.
const char* ScanNumber(const char* p, const char* end, JsonNumber* out, NumberError* error) {
  const char* q = p;
  out->negative = q < end && *q == '-';
  if (out->negative) ++q;
  if (q == end || !IsDigit(*q)) {
    *error = {q, "invalid number: a digit must follow '-'"};
    return nullptr;
  }
  // The integer part: "0" alone ("01" is "0" followed by a stray "1") or
  // digits not starting with 0.
  const char* const int_begin = q;
  if (*q == '0') {
    ++q;
  } else {
    while (q < end && IsDigit(*q)) ++q;
  }
  const char* const int_end = q;
  bool has_fraction = false, has_exponent = false;
  if (q < end && *q == '.') {
    has_fraction = true;
    ++q;
    if (q == end || !IsDigit(*q)) {
      *error = {q, "invalid number: a digit must follow '.'"};
      return nullptr;
    }
    while (q < end && IsDigit(*q)) ++q;
  }
  if (q < end && (*q == 'e' || *q == 'E')) {
    has_exponent = true;
    ++q;
    if (q < end && (*q == '+' || *q == '-')) ++q;
    if (q == end || !IsDigit(*q)) {
      *error = {q, "invalid number: a digit must follow the exponent"};
      return nullptr;
    }
    while (q < end && IsDigit(*q)) ++q;
  }
  out->integer = !has_fraction && !has_exponent;
  out->fits = false;
  out->magnitude = 0;
  if (out->integer) {
    uint64_t m = 0;
    bool fits = true;
    for (const char* d = int_begin; d < int_end && fits; ++d) {
      const uint64_t digit = static_cast<uint64_t>(*d - '0');
      fits = m <= (std::numeric_limits<uint64_t>::max() - digit) / 10;
      m = m * 10 + digit;
    }
    out->fits = fits;
    out->magnitude = fits ? m : 0;
  }
  if (FromChars(p, q, &out->value) != q) {
    *error = {p, "number out of range (beyond a double's)"};
    return nullptr;
  }
  return q;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// The four hex digits at p (end - p >= 4 checked by the caller), or -1.
int32_t Hex4(const char* p) {
  int32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    const char c = p[i];
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return -1;
    }
    v = v * 16 + digit;
  }
  return v;
}

// Whether the text ends within what would be a \uXXXX escape at q: fewer
// than its six bytes are left, and those there fit it (so the text was cut
// short, rather than holding something else).
bool EndsWithin(const char* q, const char* end) {
  if (end - q >= 6) return false;
  for (const char* c = q; c < end; ++c) {
    const std::ptrdiff_t i = c - q;
    const bool fits = i == 0   ? *c == '\\'
                      : i == 1 ? *c == 'u'
                               : std::isxdigit(static_cast<unsigned char>(*c)) != 0;
    if (!fits) return false;
  }
  return true;
}

// What the escape "\<escape>" stands for, other than \u: the character, or
// 0 if `escape` is not one of JSON's.
char SimpleEscape(char escape) {
  // Each escape letter and the character it stands for.
  static constexpr std::pair<char, char> kEscapes[] = {{'"', '"'},  {'\\', '\\'}, {'/', '/'},
                                                       {'b', '\b'}, {'f', '\f'},  {'n', '\n'},
                                                       {'r', '\r'}, {'t', '\t'}};
  for (const auto& [letter, character] : kEscapes) {
    if (letter == escape) return character;
  }
  return 0;
}

}  // namespace

bool JsonNumber::ToInt64(int64_t* out) const {
  if (!integer || !fits) return false;
  constexpr uint64_t kMaxPositive = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (!negative) {
    if (magnitude > kMaxPositive) return false;
    *out = static_cast<int64_t>(magnitude);
    return true;
  }
  if (magnitude > kMaxPositive + 1) return false;
  *out = magnitude == kMaxPositive + 1 ? std::numeric_limits<int64_t>::min()
                                       : -static_cast<int64_t>(magnitude);
  return true;
}

const char* JsonKindName(JsonKind kind) {
  // In the order of JsonKind.
  static constexpr const char* kNames[] = {"object",  "array", "string", "number",
                                           "boolean", "null",  "invalid"};
  const auto index = static_cast<size_t>(kind);
  return index < std::size(kNames) ? kNames[index] : "invalid";
}

const char* ParseFromCharsNumber(const char* p, const char* end, JsonNumber* out) {
  if (const char* q = ParseJsonNumberFast(p, end, out)) return q;
  if (p == end || (*p != '-' && !IsDigit(*p))) return nullptr;
  *out = JsonNumber();
  out->negative = *p == '-';
  return FromChars(p, end, &out->value);
}

const char* ParseJsonNumberSlow(const char* p, const char* end, JsonNumber* out) {
  NumberError ignored;
  return ScanNumber(p, end, out, &ignored);
}

JsonScanner::JsonScanner(absl::string_view text, JsonNumbers numbers)
    : begin_(text.data()), p_(text.data()), end_(text.data() + text.size()), numbers_(numbers) {
  if (text.size() >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") p_ += 3;
  // nlohmann reads a NUL byte as the end of the input: a file padded with
  // zeros reads as its text. (A NUL inside a string, a number or a literal
  // is an error either way: it cuts them short.)
  if (const void* nul = std::memchr(p_, '\0', static_cast<size_t>(end_ - p_))) {
    end_ = static_cast<const char*>(nul);
  }
}

bool JsonScanner::Fail(const char* at, const char* cause) {
  if (failed_) return false;
  failed_ = true;
  if (at >= end_) {
    at = end_;
    cause = "unexpected end of input";
  }
  error_offset_ = static_cast<size_t>(at - begin_);
  error_cause_ = cause;
  p_ = end_;  // Nothing more is read.
  return false;
}

bool JsonScanner::Literal(absl::string_view word) {
  if (static_cast<size_t>(end_ - p_) < word.size()) {
    // The bytes there may be a cut-off `word` or something else.
    for (const char* q = p_; q < end_; ++q) {
      if (*q != word[q - p_]) return Fail(q, "invalid literal");
    }
    return Fail(end_, "");
  }
  for (size_t i = 0; i < word.size(); ++i) {
    if (p_[i] != word[i]) return Fail(p_ + i, "invalid literal");
  }
  p_ += word.size();
  return true;
}

bool JsonScanner::NumberSlow(JsonNumber* out) {
  const char c = Peek();
  if (c != '-' && !IsDigit(c)) return Fail(p_, "expected a number");
  NumberError error;
  const char* q = numbers_ == JsonNumbers::kJson ? ScanNumber(p_, end_, out, &error)
                                                 : ParseFromCharsNumber(p_, end_, out);
  if (q == nullptr) {
    return error.at == nullptr ? Fail(p_, "invalid number") : Fail(error.at, error.cause);
  }
  p_ = q;
  return true;
}

bool JsonScanner::SkipValue() {
  absl::string_view ignored_string;
  JsonNumber ignored_number;
  switch (NextKind()) {
    case JsonKind::kObject:
      return Object([this](absl::string_view) { return SkipValue(); });
    case JsonKind::kArray:
      return Array([this] { return SkipValue(); });
    case JsonKind::kString:
      return Peek() == '"' ? StringAtQuote(&ignored_string, /*scratch=*/nullptr)
                           : Fail(p_, "expected a string");
    case JsonKind::kNumber:
      return Number(&ignored_number);
    case JsonKind::kBoolean:
      return Literal(*p_ == 't' ? "true" : "false");
    case JsonKind::kNull:
      return Literal("null");
    case JsonKind::kInvalid:
      break;
  }
  return Fail(p_, "expected a value");
}

std::string* JsonScanner::Scratch(bool key) {
  const size_t slot = 2 * static_cast<size_t>(depth_) + (key ? 0 : 1);
  while (scratch_.size() <= slot) scratch_.push_back(std::make_unique<std::string>());
  return scratch_[slot].get();
}

bool JsonScanner::EscapedString(bool key, const char* start, const char* q, absl::string_view* out,
                                std::string* scratch) {
  if (scratch == nullptr) scratch = Scratch(key);
  // The bytes from `start` are copied into *scratch only from the first
  // escape on (before it, they are still the string's own bytes).
  bool copying = false;
  const char* run = start;  // Start of the bytes not yet copied.
  while (true) {
    q = PlainStringEnd(q, end_);
    if (q == end_) return Fail(q, "unterminated string");
    const unsigned char c = static_cast<unsigned char>(*q);
    if (c == '"') {
      if (copying) {
        scratch->append(run, q);
        *out = *scratch;
      } else {
        *out = absl::string_view(start, static_cast<size_t>(q - start));
      }
      p_ = q + 1;
      return true;
    }
    if (c < 0x20) return Fail(q, "control character in a string (must be escaped)");
    if (c >= 0x80) {
      const size_t n =
          base::Utf8MultibyteSequenceLength(absl::string_view(q, static_cast<size_t>(end_ - q)));
      if (n == 0) return Fail(q, "invalid UTF-8 in a string");
      q += n;
      continue;
    }
    // A backslash.
    if (!copying) {
      scratch->assign(start, q);
      copying = true;
    } else {
      scratch->append(run, q);
    }
    if (end_ - q < 2) return Fail(end_, "");
    const char escape = q[1];
    if (escape == 'u') {
      if (!UnicodeEscape(&q, scratch)) return false;
    } else if (const char simple = SimpleEscape(escape); simple != 0) {
      scratch->push_back(simple);
      q += 2;
    } else {
      return Fail(q + 1, "invalid escape");
    }
    run = q;
  }
}

bool JsonScanner::UnicodeEscape(const char** at, std::string* out) {
  const char* q = *at;
  if (EndsWithin(q, end_)) return Fail(end_, "");
  const int32_t unit = end_ - q >= 6 ? Hex4(q + 2) : -1;
  if (unit < 0) return Fail(q + 2, "invalid \\u escape (four hex digits expected)");
  uint32_t cp = static_cast<uint32_t>(unit);
  q += 6;
  if (cp >= 0xDC00 && cp <= 0xDFFF) return Fail(q - 6, "lone low surrogate in a \\u escape");
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    if (EndsWithin(q, end_)) return Fail(end_, "");
    const int32_t low = end_ - q >= 6 && q[0] == '\\' && q[1] == 'u' ? Hex4(q + 2) : -1;
    if (low < 0xDC00 || low > 0xDFFF) {
      return Fail(q, "a high surrogate must be followed by a \\u low surrogate");
    }
    cp = 0x10000 + ((cp - 0xD800) << 10) + (static_cast<uint32_t>(low) - 0xDC00);
    q += 6;
  }
  AppendUtf8(cp, out);
  *at = q;
  return true;
}

std::string JsonScanner::DescribeError() const {
  if (!failed_) return "not JSON";
  const size_t size = static_cast<size_t>(end_ - begin_);
  const size_t at = std::min(error_offset_ + 1, size);
  const size_t from = at > kMaxExcerptChars ? at - kMaxExcerptChars : 0;
  std::string out =
      absl::StrCat("JSON parse error at byte ", error_offset_ + 1, " (", error_cause_, ")");
  if (at > 0) {
    absl::StrAppend(
        &out, " after ",
        base::QuoteForMessage(absl::string_view(begin_ + from, at - from), kMaxExcerptChars));
  }
  return out;
}

}  // namespace debugplane::rules_engine
