// JsonScanner: the one JSON scanner of the rules engine. smdebug's index and
// collections files (smdebug_json.h), the system metrics lines
// (profiler/system_metrics_reader.h) and the framework timeline elements
// (profiler/framework_timeline_reader.h) are all read with it, in place,
// without building a DOM.
//
//   JsonScanner s(text);
//   std::string scratch;
//   bool ok = s.Object([&](absl::string_view key) {
//     if (key == "name") return s.String(&name, &scratch);
//     return s.SkipValue();
//   }) && s.AtEnd();
//   if (!ok) error = s.DescribeError();
//
// The grammar is RFC 8259's, as strict as nlohmann::json::parse (which it
// replaced and which the tests hold it to): the four whitespace bytes; strings
// of valid UTF-8 (RFC 3629: no overlong forms, no encoded surrogates, nothing
// above U+10FFFF) without raw control characters, with the escapes \" \\ \/
// \b \f \n \r \t and \uXXXX (a high surrogate must be followed by a \u low
// surrogate; the pair is one code point); numbers
// -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?; true, false, null. A UTF-8
// byte order mark before the value is skipped, and a NUL byte ends the text
// (both as nlohmann does: a file padded with zeros reads as its text). Unlike
// nlohmann, nesting deeper than kMaxDepth arrays and objects is an error (a
// bound on the recursion).
//
// Errors: the first failure stops the scan; every later call returns false.
// failed(), error_offset() and error_cause() say where and why, and
// DescribeError() words it without quoting more than kMaxExcerptChars bytes
// of the text. Callers that find a value of a type they do not want are not
// syntax errors: they skip it (SkipValue) and word their own error.
//
// Not thread-safe (one scanner per text); the text must outlive the scanner
// and every view it gave.

#ifndef DEBUGPLANE_RULES_ENGINE_SMDEBUG_JSON_SCANNER_H_
#define DEBUGPLANE_RULES_ENGINE_SMDEBUG_JSON_SCANNER_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/config.h"
#include "absl/numeric/bits.h"
#include "absl/strings/string_view.h"

namespace debugplane::rules_engine {

// DescribeError() (and DescribeJsonError) quote at most this many bytes,
// escaped, of the text before the error.
inline constexpr size_t kMaxExcerptChars = 20;

// A JSON number as read.
struct JsonNumber {
  double value = 0;  // Correctly rounded; +-inf or +-0 beyond double's range.
  // No fraction and no exponent: an integer literal. Then `magnitude` is
  // its absolute value when `fits` (at most 2^64 - 1).
  bool integer = false;
  bool negative = false;  // A leading '-' ("-0" too).
  bool fits = false;
  uint64_t magnitude = 0;

  // The integer as int64_t when it is an integer literal that fits
  // (-2^63 .. 2^63 - 1). False otherwise.
  bool ToInt64(int64_t* out) const;
};

// What the next value is, from its first byte (kInvalid: no value starts
// with it, or the end of the text).
enum class JsonKind { kObject, kArray, kString, kNumber, kBoolean, kNull, kInvalid };
// nlohmann's type_name() of a kind: "object", "array", "string", "number",
// "boolean", "null" ("invalid" for kInvalid).
const char* JsonKindName(JsonKind kind);

// Reads the JSON number at [p, end) (a number starts with '-' or a digit);
// returns the end of the number, or nullptr if the bytes there are not one.
// What JsonScanner::Number uses; for format matchers that already know a
// number comes (the system metrics reader's smdebug layout).
inline const char* ParseJsonNumber(const char* p, const char* end, JsonNumber* out);
// The complete grammar and the values beyond the fast path below.
const char* ParseJsonNumberSlow(const char* p, const char* end, JsonNumber* out);

// The numbers smdebug writes ("34", "34.23", "1795300000.0"): at most 19
// digits, no exponent, a mantissa of at most 2^53 (Clinger's fast path: the
// mantissa and a power of ten up to 10^22 are exact doubles, so one division
// is correctly rounded). nullptr for anything else (not an error: the slow
// path then reads it or says why not).
ABSL_ATTRIBUTE_ALWAYS_INLINE inline const char* ParseJsonNumberFast(const char* p, const char* end,
                                                                    JsonNumber* out) {
  static constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                      1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                      1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  const char* q = p;
  const bool negative = q < end && *q == '-';
  if (negative) ++q;
  const char* const first = q;
  uint64_t mantissa = 0;
  int digits = 0;
  while (q < end && digit(*q) && digits < 19) {
    mantissa = mantissa * 10 + static_cast<uint64_t>(*q - '0');
    ++q, ++digits;
  }
  const int int_digits = digits;
  if (int_digits == 0 || (int_digits > 1 && *first == '0') || (q < end && digit(*q))) {
    return nullptr;
  }
  int fraction = 0;
  const bool has_point = q < end && *q == '.';
  if (has_point) {
    ++q;
    while (q < end && digit(*q) && digits < 19) {
      mantissa = mantissa * 10 + static_cast<uint64_t>(*q - '0');
      ++q, ++digits, ++fraction;
    }
    if (fraction == 0 || (q < end && digit(*q))) return nullptr;
  }
  if ((q < end && (*q == 'e' || *q == 'E')) || mantissa > (uint64_t{1} << 53)) return nullptr;
  const double d = fraction == 0 ? static_cast<double>(mantissa)
                                 : static_cast<double>(mantissa) / kPow10[fraction];
  out->value = negative ? -d : d;
  out->integer = !has_point;
  out->negative = negative;
  out->fits = !has_point;
  out->magnitude = has_point ? 0 : mantissa;
  return q;
}

inline const char* ParseJsonNumber(const char* p, const char* end, JsonNumber* out) {
  if (const char* q = ParseJsonNumberFast(p, end, out)) return q;
  return ParseJsonNumberSlow(p, end, out);
}

// Like ParseJsonNumber, but reading what std::from_chars reads from p (a
// '-' or a digit): also leading zeros ("007") and a point without digits
// after it ("1."). The value is the same where both read a number;
// `integer` and `fits` are set only where ParseJsonNumberFast reads it.
// (The system metrics reader's numbers since its first version: kept for
// the files other tools write.)
const char* ParseFromCharsNumber(const char* p, const char* end, JsonNumber* out);

// How a JsonScanner reads numbers: by JSON's grammar, or as
// ParseFromCharsNumber does.
enum class JsonNumbers { kJson, kFromChars };

class JsonScanner {
 public:
  // Nesting of arrays and objects beyond this is an error.
  static constexpr int kMaxDepth = 512;

  // Skips a leading UTF-8 byte order mark.
  explicit JsonScanner(absl::string_view text, JsonNumbers numbers = JsonNumbers::kJson);

  JsonScanner(const JsonScanner&) = delete;
  JsonScanner& operator=(const JsonScanner&) = delete;

  // The byte the next token starts with, after whitespace; '\0' at the end
  // (or after a failure).
  ABSL_ATTRIBUTE_ALWAYS_INLINE char Peek() {
    SkipWhitespace();
    return p_ == end_ ? '\0' : *p_;  // A failure moves p_ to the end.
  }
  JsonKind NextKind() {
    switch (Peek()) {
      case '{':
        return JsonKind::kObject;
      case '[':
        return JsonKind::kArray;
      case '"':
        return JsonKind::kString;
      case 't':
      case 'f':
        return JsonKind::kBoolean;
      case 'n':
        return JsonKind::kNull;
      case '-':
      case '0':
      case '1':
      case '2':
      case '3':
      case '4':
      case '5':
      case '6':
      case '7':
      case '8':
      case '9':
        return JsonKind::kNumber;
      default:
        return JsonKind::kInvalid;  // '\0' at the end too.
    }
  }
  // Consumes `c` (a structural byte) after whitespace; false (not a failure)
  // if the next byte is another.
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool Consume(char c) {
    if (Peek() != c || c == '\0') return false;
    ++p_;
    return true;
  }
  // Whether only whitespace is left; a failure ("bytes after the value")
  // if not.
  bool AtEnd() {
    SkipWhitespace();
    if (p_ != end_) return Fail(p_, "bytes after the value");
    return !failed_;
  }

  // Reads a string. *out views the text when the string has no escapes,
  // else it views *scratch, which then holds the decoded UTF-8 (\u0000
  // included). False (a failure) if the next value is not a valid string.
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool String(absl::string_view* out, std::string* scratch);
  // Reads a number. False (a failure) if the next value is not a number.
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool Number(JsonNumber* out) {
    if (Peek() != '\0') {
      if (const char* q = ParseJsonNumberFast(p_, end_, out)) {
        p_ = q;
        return true;
      }
    }
    return NumberSlow(out);
  }
  // Reads (and validates) any value, nested ones included.
  bool SkipValue();
  // Reads an object: for each member, `on_member(key)` must consume its
  // value (with String, Number, Object, SkipValue, ...) and return whether
  // it did; a false return stops the scan (a failure if the scanner has
  // none yet: "rejected by the reader"). Repeated keys are each passed on.
  // False (a failure) if the next value is not a valid object.
  template <typename OnMember>
  bool Object(OnMember on_member);
  // Reads an array: `on_element()` consumes each element, as above.
  template <typename OnElement>
  bool Array(OnElement on_element);

  bool failed() const { return failed_; }
  // The offset in the text (BOM included) of the byte the scan failed at
  // (the text's size for a text that ended too soon).
  size_t error_offset() const { return error_offset_; }
  // Why, e.g. "invalid escape", "unterminated string"; "" before a failure.
  const char* error_cause() const { return error_cause_; }
  // "JSON parse error at byte 12 (invalid literal) after "{\"Type\": tru"",
  // byte 1-based, with at most kMaxExcerptChars bytes (escaped) before and
  // including the failing one. "not JSON" without a failure.
  std::string DescribeError() const;
  // The offset of the next unread byte.
  size_t offset() const { return static_cast<size_t>(p_ - begin_); }

 private:
  void SkipWhitespace() {
    // Most tokens follow no whitespace or one space: one compare decides.
    while (p_ != end_ && static_cast<unsigned char>(*p_) <= ' ' &&
           (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) {
      ++p_;
    }
  }
  // Records the first failure at `at`; returns false.
  ABSL_ATTRIBUTE_NOINLINE bool Fail(const char* at, const char* cause);
  bool Enter();
  bool Literal(absl::string_view word);
  // String() with p_ at the opening quote.
  // `scratch` nullptr: the scanner's own (see EscapedString).
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool StringAtQuote(absl::string_view* out, std::string* scratch,
                                                  bool key = false);
  bool NumberSlow(JsonNumber* out);
  // The scanner's scratch string for a key (or else a skipped string) at
  // the current depth.
  std::string* Scratch(bool key);
  // `scratch` nullptr: Scratch(key).
  bool EscapedString(bool key, const char* start, const char* stop, absl::string_view* out,
                     std::string* scratch);
  // Decodes the \\uXXXX escape (with its low surrogate, if a high one) at
  // *at into `out` as UTF-8 and moves *at past it; false (Fail) if invalid.
  bool UnicodeEscape(const char** at, std::string* out);
  // An object or array: `open`, items separated by ',' (each read by
  // on_item, which returns false on failure), `close`. `not_open` and
  // `not_closed` are the failures' causes.
  template <typename OnItem>
  bool Container(char open, char close, const char* not_open, const char* not_closed,
                 OnItem on_item);
  // An item's reader said no: fails, unless it already has.
  bool Rejected() { return failed_ ? false : Fail(p_, "rejected by the reader"); }

  const char* const begin_;
  const char* p_;
  const char* end_;  // The text's end, or its first NUL byte.
  int depth_ = 0;
  bool failed_ = false;
  size_t error_offset_ = 0;
  const char* error_cause_ = "";
  const JsonNumbers numbers_;
  // Decoded keys (slot 2 * depth) and skipped strings (2 * depth + 1) with
  // escapes: a key stays valid while its value is read, and no string is
  // built for the plain ones.
  // Each string on its own (a view of an outer key must survive the vector
  // growing for an inner one).
  std::vector<std::unique_ptr<std::string>> scratch_;
};

// The end of the plain part of a string whose bytes start at `q`: the first
// byte that is a quote, a backslash, a control character or not ASCII, or
// `end`. Eight bytes at a time where the text allows.
inline const char* PlainStringEnd(const char* q, const char* end) {
#if defined(ABSL_IS_LITTLE_ENDIAN)
  // The lowest flagged byte of the tests is a true match (the classic
  // "has zero byte" trick only flags false bytes above a true one).
  constexpr uint64_t kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
  while (end - q >= 8) {
    uint64_t w;
    std::memcpy(&w, q, 8);
    const uint64_t quote = w ^ (kOnes * '"'), backslash = w ^ (kOnes * '\\');
    // Below 0x20 or from 0x80 on: (w - 0x20) borrows, or w has its top bit.
    const uint64_t hits =
        (((quote - kOnes) & ~quote) | ((backslash - kOnes) & ~backslash) | (w - kOnes * 0x20) | w) &
        kHigh;
    if (hits != 0) return q + (absl::countr_zero(hits) >> 3);
    q += 8;
  }
#endif
  for (; q < end; ++q) {
    const unsigned char c = static_cast<unsigned char>(*q);
    if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) return q;
  }
  return end;
}

// --- Inline parts ----------------------------------------------------------

inline ABSL_ATTRIBUTE_ALWAYS_INLINE bool JsonScanner::String(absl::string_view* out,
                                                             std::string* scratch) {
  if (Peek() != '"') return Fail(p_, "expected a string");
  return StringAtQuote(out, scratch);
}

inline ABSL_ATTRIBUTE_ALWAYS_INLINE bool JsonScanner::StringAtQuote(absl::string_view* out,
                                                                    std::string* scratch,
                                                                    bool key) {
  const char* const start = p_ + 1;
  const char* q = PlainStringEnd(start, end_);
  if (q != end_ && *q == '"') {
    *out = absl::string_view(start, static_cast<size_t>(q - start));
    p_ = q + 1;
    return true;
  }
  return EscapedString(key, start, q, out, scratch);
}

inline bool JsonScanner::Enter() {
  if (++depth_ > kMaxDepth) return Fail(p_, "nesting deeper than 512");
  ++p_;
  return true;
}

template <typename OnItem>
bool JsonScanner::Container(char open, char close, const char* not_open, const char* not_closed,
                            OnItem on_item) {
  if (Peek() != open) return Fail(p_, not_open);
  if (!Enter()) return false;
  if (!Consume(close)) {
    do {
      if (!on_item()) return false;
    } while (Consume(','));
    if (!Consume(close)) return Fail(p_, not_closed);
  }
  --depth_;
  return true;
}

template <typename OnMember>
bool JsonScanner::Object(OnMember on_member) {
  return Container('{', '}', "expected an object", "expected ',' or '}'", [&] {
    absl::string_view key;
    if (Peek() != '"') return Fail(p_, "expected a member name");
    if (!StringAtQuote(&key, /*scratch=*/nullptr, /*key=*/true)) return false;
    if (!Consume(':')) return Fail(p_, "expected ':'");
    return on_member(key) || Rejected();
  });
}

template <typename OnElement>
bool JsonScanner::Array(OnElement on_element) {
  return Container('[', ']', "expected an array", "expected ',' or ']'",
                   [&] { return on_element() || Rejected(); });
}

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_SMDEBUG_JSON_SCANNER_H_
