#include "service/http/percent_decoding.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace debugplane::service::http {
namespace {

TEST(PercentDecodingTest, EscapesOfEitherCaseDecodeAndPlusFollowsItsMeaning) {
  EXPECT_EQ(PercentDecode("a%2Fb%2fc%20d+e", PlusMeans::kPlus), "a/b/c d+e");
  EXPECT_EQ(PercentDecode("a%2Fb%2fc%20d+e", PlusMeans::kSpace), "a/b/c d e");
  EXPECT_EQ(PercentDecode("%00x", PlusMeans::kPlus), std::string("\0x", 2));
  EXPECT_EQ(PercentDecodeStrict("%E2%82%AC+", PlusMeans::kSpace), "\xE2\x82\xAC ");
}

TEST(PercentDecodingTest, ABadEscapeStaysLenientlyAndFailsStrictly) {
  for (const char* bad : {"%", "%4", "a%", "%zz", "%4g", "x%G1y"}) {
    EXPECT_EQ(PercentDecode(bad, PlusMeans::kPlus), bad);
    EXPECT_EQ(PercentDecodeStrict(bad, PlusMeans::kPlus), std::nullopt) << bad;
  }
  // The escape right at the end is whole.
  EXPECT_EQ(PercentDecodeStrict("ab%41", PlusMeans::kPlus), "abA");
  EXPECT_EQ(PercentDecodeStrict("", PlusMeans::kPlus), "");
}

}  // namespace
}  // namespace debugplane::service::http
