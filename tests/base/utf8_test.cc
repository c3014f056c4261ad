#include "base/utf8.h"

#include <string>

#include "gtest/gtest.h"

namespace debugplane::base {
namespace {

TEST(Utf8MultibyteSequenceLengthTest, WellFormedSequencesOfTwoToFourBytes) {
  EXPECT_EQ(Utf8MultibyteSequenceLength("\xC3\xA9"), 2u);           // U+00E9
  EXPECT_EQ(Utf8MultibyteSequenceLength("\xE2\x82\xAC rest"), 3u);  // U+20AC
  EXPECT_EQ(Utf8MultibyteSequenceLength("\xF0\x9F\x98\x80"), 4u);   // U+1F600
  EXPECT_EQ(Utf8MultibyteSequenceLength("\xF4\x8F\xBF\xBF"), 4u);   // U+10FFFF
}

TEST(Utf8MultibyteSequenceLengthTest, NoneForAsciiEmptyOrIllFormedText) {
  EXPECT_EQ(Utf8MultibyteSequenceLength(""), 0u);
  EXPECT_EQ(Utf8MultibyteSequenceLength("a"), 0u);
  EXPECT_EQ(Utf8MultibyteSequenceLength("\xC0\x80"), 0u);          // Overlong.
  EXPECT_EQ(Utf8MultibyteSequenceLength("\xE0\x80\x80"), 0u);      // Overlong.
  EXPECT_EQ(Utf8MultibyteSequenceLength("\xED\xA0\x80"), 0u);      // Surrogate.
  EXPECT_EQ(Utf8MultibyteSequenceLength("\xF4\x90\x80\x80"), 0u);  // Above U+10FFFF.
  EXPECT_EQ(Utf8MultibyteSequenceLength("\xE2\x82"), 0u);          // Truncated.
  EXPECT_EQ(Utf8MultibyteSequenceLength("\xE2\x82x"), 0u);         // Not a continuation.
  EXPECT_EQ(Utf8MultibyteSequenceLength("\x80"), 0u);              // A lone continuation.
}

}  // namespace
}  // namespace debugplane::base
