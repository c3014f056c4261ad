#include "rules_engine/smdebug/json_scanner.h"

#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace debugplane::rules_engine {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// The whole text as one JSON value.
bool Valid(absl::string_view text) {
  JsonScanner s(text);
  return s.SkipValue() && s.AtEnd();
}

// The string value that is the whole text; the cause on failure.
std::string StringValue(absl::string_view text, bool* ok) {
  JsonScanner s(text);
  absl::string_view out;
  std::string scratch;
  *ok = s.String(&out, &scratch) && s.AtEnd();
  return *ok ? std::string(out) : std::string(s.error_cause());
}

JsonNumber NumberValue(absl::string_view text) {
  JsonScanner s(text);
  JsonNumber n;
  EXPECT_TRUE(s.Number(&n) && s.AtEnd()) << text << ": " << s.DescribeError();
  return n;
}

TEST(JsonScannerTest, PlainStringsAreViewsOfTheText) {
  const std::string text = "\"caf\xc3\xa9 au lait\"";
  JsonScanner s(text);
  absl::string_view out;
  std::string scratch;
  ASSERT_TRUE(s.String(&out, &scratch));
  EXPECT_EQ(out, "caf\xc3\xa9 au lait");
  EXPECT_EQ(out.data(), text.data() + 1);  // Not copied.
  EXPECT_TRUE(scratch.empty());
}

TEST(JsonScannerTest, Escapes) {
  bool ok = false;
  EXPECT_EQ(StringValue(R"("a\"b\\c\/d\be\ff\ng\rh\ti")", &ok), "a\"b\\c/d\be\ff\ng\rh\ti");
  EXPECT_TRUE(ok);
  EXPECT_EQ(StringValue(R"("\u0041\u00e9\u20AC")", &ok), "A\xc3\xa9\xe2\x82\xac");
  EXPECT_TRUE(ok);
  EXPECT_EQ(StringValue(R"("x\u0000y")", &ok), std::string("x\0y", 3));
  EXPECT_TRUE(ok);
  // A surrogate pair is one code point (U+1F600), four bytes of UTF-8.
  EXPECT_EQ(StringValue(R"("\ud83d\ude00!")", &ok), "\xf0\x9f\x98\x80!");
  EXPECT_TRUE(ok);
  EXPECT_EQ(StringValue(R"("\uDBFF\uDFFF")", &ok), "\xf4\x8f\xbf\xbf");
  EXPECT_TRUE(ok);
}

TEST(JsonScannerTest, BadEscapesAndSurrogatesAreRefused) {
  bool ok = true;
  EXPECT_EQ(StringValue(R"("\x41")", &ok), "invalid escape");
  EXPECT_FALSE(ok);
  EXPECT_THAT(StringValue(R"("\u12g4")", &ok), HasSubstr("four hex digits"));
  EXPECT_FALSE(ok);
  EXPECT_THAT(StringValue(R"("\ude00")", &ok), HasSubstr("lone low surrogate"));
  EXPECT_FALSE(ok);
  EXPECT_THAT(StringValue(R"("\ud83d")", &ok), Not(HasSubstr("lone low")));
  EXPECT_FALSE(ok);
  EXPECT_THAT(StringValue(R"("\ud83dxxxxxx")", &ok), HasSubstr("high surrogate"));
  EXPECT_FALSE(ok);
  EXPECT_THAT(StringValue(R"("\ud83d\u0041")", &ok), HasSubstr("high surrogate"));
  EXPECT_FALSE(ok);
  EXPECT_THAT(StringValue(R"("\ud83d\ud83d")", &ok), HasSubstr("high surrogate"));
  EXPECT_FALSE(ok);
}

TEST(JsonScannerTest, RawControlCharactersAndInvalidUtf8AreRefused) {
  bool ok = true;
  EXPECT_THAT(StringValue("\"a\tb\"", &ok), HasSubstr("control character"));
  EXPECT_FALSE(ok);
  for (const char* bad : {"\"\xc0\x80\"", "\"\xed\xa0\x80\"", "\"\xf5\x80\x80\x80\"",
                          "\"\xe2\x82\"", "\"\x80\"", "\"\xf0\x8f\xbf\xbf\"", "\"\xff\""}) {
    EXPECT_EQ(StringValue(bad, &ok), "invalid UTF-8 in a string") << bad;
    EXPECT_FALSE(ok);
  }
  EXPECT_EQ(StringValue("\"\x7f\"", &ok), "\x7f");  // DEL is no control character to JSON.
  EXPECT_TRUE(ok);
}

TEST(JsonScannerTest, Numbers) {
  JsonNumber n = NumberValue("0");
  EXPECT_TRUE(n.integer && n.fits && !n.negative);
  EXPECT_EQ(n.magnitude, 0u);
  n = NumberValue("-0");
  EXPECT_TRUE(n.integer && n.fits && n.negative);
  EXPECT_EQ(n.magnitude, 0u);
  EXPECT_EQ(n.value, 0.0);
  EXPECT_TRUE(std::signbit(n.value));
  int64_t i = 1;
  EXPECT_TRUE(n.ToInt64(&i));
  EXPECT_EQ(i, 0);
  n = NumberValue("-0.0");
  EXPECT_FALSE(n.integer);
  EXPECT_TRUE(std::signbit(n.value));
  EXPECT_EQ(NumberValue("34.23").value, 34.23);
  EXPECT_EQ(NumberValue("1795300000.0").value, 1795300000.0);
  EXPECT_EQ(NumberValue("1e3").value, 1000);
  EXPECT_EQ(NumberValue("1E+3").value, 1000);
  EXPECT_EQ(NumberValue("-1.25e2").value, -125);
  EXPECT_EQ(NumberValue("25e-2").value, 0.25);
  EXPECT_FALSE(NumberValue("1e3").integer);
  n = NumberValue("18446744073709551615");
  EXPECT_TRUE(n.integer && n.fits);
  EXPECT_EQ(n.magnitude, std::numeric_limits<uint64_t>::max());
  EXPECT_FALSE(n.ToInt64(&i));
  n = NumberValue("18446744073709551616");
  EXPECT_TRUE(n.integer);
  EXPECT_FALSE(n.fits);
  EXPECT_EQ(n.value, 18446744073709551616.0);
  ASSERT_TRUE(NumberValue("-9223372036854775808").ToInt64(&i));
  EXPECT_EQ(i, std::numeric_limits<int64_t>::min());
  EXPECT_FALSE(NumberValue("-9223372036854775809").ToInt64(&i));
  EXPECT_FALSE(NumberValue("9223372036854775808").ToInt64(&i));
  // Correctly rounded wherever the fast path does not apply, as strtod.
  for (const char* text :
       {"9007199254740993", "0.1", "3.14159265358979323846264338327950288",
        "1.7976931348623157e308", "2.2250738585072014e-308", "5e-324",
        "123456789012345678901234567890", "0.30000000000000004", "1e22", "1e23", "-2.5e-7"}) {
    EXPECT_EQ(NumberValue(text).value, std::strtod(text, nullptr)) << text;
  }
  // Below double's range: +-0 (as nlohmann, through strtod); above it, an
  // error (nlohmann's "number overflow").
  EXPECT_EQ(NumberValue("1e-400").value, 0.0);
  EXPECT_TRUE(std::signbit(NumberValue("-1e-400").value));
  for (const char* huge : {"1e400", "-1e400", "1797693134862315807937289714053e280"}) {
    JsonScanner s(huge);
    JsonNumber n;
    EXPECT_FALSE(s.Number(&n)) << huge;
    EXPECT_THAT(s.error_cause(), HasSubstr("out of range")) << huge;
  }
}

TEST(JsonScannerTest, FromCharsNumbersAlsoTakeLeadingZerosAndATrailingPoint) {
  for (const char* text : {"007", "-01.50", "1.", "0.5", "12e3", "-0"}) {
    JsonScanner s(text, JsonNumbers::kFromChars);
    JsonNumber n;
    ASSERT_TRUE(s.Number(&n) && s.AtEnd()) << text << ": " << s.DescribeError();
    EXPECT_EQ(n.value, std::strtod(text, nullptr)) << text;
  }
  for (const char* not_json : {"007", "-01.50", "1."}) EXPECT_FALSE(Valid(not_json)) << not_json;
  JsonScanner huge("1e400", JsonNumbers::kFromChars);
  JsonNumber n;
  EXPECT_FALSE(huge.Number(&n));
}

TEST(JsonScannerTest, MalformedNumbersAreRefused) {
  for (const char* bad : {"01", "-01", "1.", ".5", "-", "1e", "1e+", "+1", "--1", "0x10", "1.e3",
                          "-.5", "Infinity", "NaN", "1_000"}) {
    EXPECT_FALSE(Valid(bad)) << bad;
  }
  JsonScanner s("1.x");
  JsonNumber n;
  EXPECT_FALSE(s.Number(&n));
  EXPECT_EQ(s.error_offset(), 2u);
  EXPECT_THAT(s.error_cause(), HasSubstr("a digit must follow '.'"));
}

TEST(JsonScannerTest, TruncatedInputFailsAtItsEnd) {
  const std::string text =
      R"({"a": [1, -2.5e3, "x\u00e9\"y", true, false, null, {"b": {}}], "c": "\ud83d\ude00"})";
  ASSERT_TRUE(Valid(text));
  for (size_t n = 0; n < text.size(); ++n) {
    JsonScanner s(absl::string_view(text).substr(0, n));
    EXPECT_FALSE(s.SkipValue() && s.AtEnd()) << n;
    EXPECT_EQ(s.error_offset(), n) << text.substr(0, n);
    EXPECT_STREQ(s.error_cause(), "unexpected end of input") << text.substr(0, n);
  }
}

TEST(JsonScannerTest, DepthIsLimited) {
  const int limit = JsonScanner::kMaxDepth;
  EXPECT_TRUE(Valid(std::string(limit, '[') + std::string(limit, ']')));
  const std::string deep = std::string(limit + 1, '[') + std::string(limit + 1, ']');
  JsonScanner s(deep);
  EXPECT_FALSE(s.SkipValue());
  EXPECT_THAT(s.error_cause(), HasSubstr("nesting deeper than"));
  EXPECT_EQ(s.error_offset(), static_cast<size_t>(limit));
  std::string objects;
  for (int i = 0; i <= limit; ++i) objects += "{\"k\":";
  objects += "1" + std::string(limit + 1, '}');
  EXPECT_FALSE(Valid(objects));
  // Depth counts what is open, not what was seen: siblings do not add up.
  std::string wide = "[";
  for (int i = 0; i < 2 * limit; ++i) wide += "[[]],";
  wide += "0]";
  EXPECT_TRUE(Valid(wide));
}

TEST(JsonScannerTest, BytesAfterTheValueAreAnError) {
  JsonScanner s("{\"a\": 1} x");
  ASSERT_TRUE(s.SkipValue());
  EXPECT_FALSE(s.AtEnd());
  EXPECT_STREQ(s.error_cause(), "bytes after the value");
  EXPECT_EQ(s.error_offset(), 9u);
  EXPECT_TRUE(Valid(" {\"a\": 1} \r\n\t"));
  EXPECT_FALSE(Valid("{\"a\": 1}\f"));  // Only JSON's four whitespace bytes.
  EXPECT_FALSE(Valid("1 2"));
  EXPECT_FALSE(Valid(""));
  EXPECT_FALSE(Valid("   "));
  EXPECT_TRUE(Valid("\xef\xbb\xbf{}"));   // A byte order mark first is skipped,
  EXPECT_FALSE(Valid("{}\xef\xbb\xbf"));  // nowhere else.
  EXPECT_FALSE(Valid(" \xef\xbb\xbf{}"));
  // A NUL byte ends the text (as in nlohmann): zero padding after the value
  // is no error; inside a string it is.
  EXPECT_TRUE(Valid(std::string("{\"a\": 2}\0\0\0+e", 13)));
  EXPECT_TRUE(Valid(std::string("2\0\0\0+e", 6)));
  EXPECT_FALSE(Valid(std::string("\"a\0b\"", 5)));
  EXPECT_FALSE(Valid(std::string("\0{}", 3)));
}

TEST(JsonScannerTest, ObjectsPassEveryMemberOnRepeatedKeysIncluded) {
  JsonScanner s(R"({"a": 1, "b\u0061": "x", "a": [2]})");
  std::vector<std::string> keys;
  ASSERT_TRUE(s.Object([&](absl::string_view key) {
    keys.emplace_back(key);
    return s.SkipValue();
  }));
  EXPECT_TRUE(s.AtEnd());
  EXPECT_THAT(keys, ::testing::ElementsAre("a", "ba", "a"));
  // A decoded key stays valid while its value is read, however deeply
  // nested (the index fuzzer found a key read after a nested object).
  JsonScanner nested(R"({"k\u0031": {"a\u0032": {"b\u0033": ["\u0034"]}, "c": "\u0035"}})");
  std::vector<std::string> after;
  std::function<bool(absl::string_view)> member = [&](absl::string_view key) {
    const bool read =
        nested.NextKind() == JsonKind::kObject ? nested.Object(member) : nested.SkipValue();
    after.emplace_back(key);  // Read after its value.
    return read;
  };
  ASSERT_TRUE(nested.Object(member) && nested.AtEnd());
  EXPECT_THAT(after, ::testing::ElementsAre("b3", "a2", "c", "k1"));
  // A reader that refuses a member stops the scan with a failure.
  JsonScanner refused(R"({"a": 1})");
  EXPECT_FALSE(refused.Object([](absl::string_view) { return false; }));
  EXPECT_TRUE(refused.failed());
  EXPECT_STREQ(refused.error_cause(), "rejected by the reader");
  // Kinds, and their names as nlohmann words them.
  JsonScanner kinds(R"([{}, [], "", 0, -1, true, false, null])");
  std::vector<std::string> names;
  ASSERT_TRUE(kinds.Array([&] {
    names.push_back(JsonKindName(kinds.NextKind()));
    return kinds.SkipValue();
  }));
  EXPECT_THAT(names, ::testing::ElementsAre("object", "array", "string", "number", "number",
                                            "boolean", "boolean", "null"));
}

TEST(JsonScannerTest, ErrorsQuoteNoMoreThanAnExcerpt) {
  const std::string secret = "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
  const std::string text = "{\"k\": \"" + secret + "\x01\"}";
  JsonScanner s(text);
  ASSERT_FALSE(s.SkipValue());
  const std::string error = s.DescribeError();
  EXPECT_THAT(error, StartsWith(absl::StrCat("JSON parse error at byte ", text.find('\x01') + 1,
                                             " (control character in a string")));
  EXPECT_THAT(error, HasSubstr("EXAMPLEKEY"));
  EXPECT_THAT(error, Not(HasSubstr("wJalrXUtnFEMI")));
  EXPECT_EQ(JsonScanner("{}").DescribeError(), "not JSON");
  // After a failure nothing more is read.
  EXPECT_FALSE(s.AtEnd());
  EXPECT_EQ(s.Peek(), '\0');
}

// The scanner accepts exactly what nlohmann::json::parse accepts (the
// parser it replaced in the readers), and reads the same strings, over
// documents and every prefix and single-byte change of them.
void ExpectSameAsNlohmann(const std::string& text) {
  const bool reference =
      !nlohmann::json::parse(text.begin(), text.end(), nullptr, false).is_discarded();
  EXPECT_EQ(Valid(text), reference) << text;
}

TEST(JsonScannerTest, AcceptsWhatNlohmannAccepts) {
  const std::vector<std::string> texts = {
      R"({"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": 34.23, "NodeId": "algo-1", "Timestamp": 1795300000.0})",
      R"([{"name": "a\u00e9\ud83d\ude00\"\\\/", "ph": "X", "ts": -0, "dur": 1e-3, "args": {"x": [true, false, null]}}])",
      R"({"a": [0, -0.5, 12E+2, 1e-400, 1e400, "\b\f\n\r\t"], "b": {}})",
      "\xef\xbb\xbf[\"caf\xc3\xa9\", \"\xf0\x9f\x98\x80\"]",
  };
  for (const std::string& text : texts) {
    ExpectSameAsNlohmann(text);
    for (size_t n = 0; n < text.size(); ++n) ExpectSameAsNlohmann(text.substr(0, n));
    for (size_t i = 0; i < text.size(); ++i) {
      for (char c : {'"', '{',  '}', '[', ']',  ',', ':',    '0',    '1',    '-',    '+', '.',
                     'e', '\\', 'u', ' ', '\t', 'x', '\x01', '\x80', '\xc3', '\xed', '\0'}) {
        std::string changed = text;
        changed[i] = c;
        ExpectSameAsNlohmann(changed);
      }
    }
  }
  // Decoded strings agree too.
  for (const std::string& text :
       {std::string(R"("a\u00e9\ud83d\ude00\"\\\/\u0000z")"), std::string("\"caf\xc3\xa9\"")}) {
    bool ok = false;
    EXPECT_EQ(StringValue(text, &ok), nlohmann::json::parse(text).get<std::string>());
    EXPECT_TRUE(ok);
  }
}

}  // namespace
}  // namespace debugplane::rules_engine
