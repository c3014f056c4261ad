#include "base/utc_time.h"

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace debugplane::base {
namespace {

// FormatUtc writes what absl::FormatTime writes in UTC, for the formats the
// rooms use.
TEST(FormatUtcTest, MatchesAbslFormatTimeInUtc) {
  const absl::Time times[] = {
      absl::FromUnixSeconds(0),
      absl::FromUnixMicros(1795300500250000),  // 2026-11-21T22:35:00.25Z
      absl::FromUnixMillis(1795300500100),
      absl::FromUnixNanos(1795300500123456789),
      absl::FromUnixMicros(-1500),
      absl::FromUnixSeconds(951782400),  // 2000-02-29
  };
  const char* formats[] = {
      "%Y-%m-%dT%H:%M:%E*SZ",
      "%Y-%m-%dT%H:%M:%E1SZ",
      "%Y-%m-%dT%H:%M:%E3SZ",
      "%Y-%m-%d %H:%M:%S UTC",
      "%H:%M:%S",
      "%b %d %H:%M",
      "%b %d",
      "%a, %d %b %Y %H:%M:%S +0000",
      "100%% at %H",
  };
  for (absl::Time t : times) {
    for (const char* format : formats) {
      EXPECT_EQ(FormatUtc(t, format), absl::FormatTime(format, t, absl::UTCTimeZone()))
          << format << " at " << absl::ToUnixNanos(t);
    }
    EXPECT_EQ(FormatUtc(t, "%Y-%m-%dT%H:%M:%S+00:00"),
              absl::FormatTime(absl::RFC3339_sec, t, absl::UTCTimeZone()));
  }
}

TEST(FormatUtcTest, Examples) {
  const absl::Time t = absl::FromUnixMicros(1795300500250000);
  EXPECT_EQ(FormatUtc(t, "%Y-%m-%dT%H:%M:%E*SZ"), "2026-11-21T22:35:00.25Z");
  EXPECT_EQ(FormatUtc(t, "%Y-%m-%dT%H:%M:%E1SZ"), "2026-11-21T22:35:00.2Z");
  EXPECT_EQ(FormatUtc(absl::FromUnixSeconds(1795300500), "%Y-%m-%dT%H:%M:%E*SZ"),
            "2026-11-21T22:35:00Z");
  EXPECT_EQ(FormatUtc(absl::InfiniteFuture(), "%Y"), "infinite-future");
  EXPECT_EQ(FormatUtc(absl::InfinitePast(), "%Y"), "infinite-past");
}

}  // namespace
}  // namespace debugplane::base
