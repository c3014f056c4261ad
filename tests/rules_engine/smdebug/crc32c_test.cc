#include "rules_engine/smdebug/crc32c.h"

#include <random>
#include <string>

#include "gtest/gtest.h"

namespace debugplane::rules_engine {
namespace {

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
  // RFC 3720 (iSCSI) B.4 test vectors.
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(Crc32c(ascending), 0x46DD794Eu);
}

TEST(Crc32cTest, PortableMatchesVectors) {
  EXPECT_EQ(Crc32cExtendPortable(0, "123456789", 9), 0xE3069283u);
}

TEST(Crc32cTest, ExtendEqualsWhole) {
  const std::string s = "hello, castagnoli polynomial and friends";
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    EXPECT_EQ(Crc32cExtend(Crc32cExtend(0, s.data(), cut), s.data() + cut, s.size() - cut),
              Crc32c(s));
  }
}

TEST(Crc32cTest, HardwareAndPortableAgree) {
  if (!Crc32cHardwareAvailable()) GTEST_SKIP() << "no SSE4.2 on this CPU";
  std::mt19937 rng(42);
  std::string buf(4096 + 16, '\0');
  for (char& c : buf) c = static_cast<char>(rng());
  // Every small length at every alignment, then some large ones.
  for (size_t align = 0; align < 8; ++align) {
    for (size_t len = 0; len < 100; ++len) {
      ASSERT_EQ(Crc32cExtendHardware(0, buf.data() + align, len),
                Crc32cExtendPortable(0, buf.data() + align, len))
          << align << " " << len;
    }
  }
  for (size_t len : {1000u, 4095u, 4096u}) {
    EXPECT_EQ(Crc32cExtendHardware(7, buf.data() + 3, len),
              Crc32cExtendPortable(7, buf.data() + 3, len));
  }
}

TEST(Crc32cTest, MaskRoundTrips) {
  for (uint32_t c : {0u, 1u, 0xE3069283u, 0xffffffffu}) {
    EXPECT_EQ(UnmaskCrc32c(MaskCrc32c(c)), c);
    EXPECT_NE(MaskCrc32c(c), c);
  }
  // The mask formula of smdebug-format.md.
  const uint32_t c = 0xE3069283u;
  EXPECT_EQ(MaskedCrc32c("123456789"), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

}  // namespace
}  // namespace debugplane::rules_engine
