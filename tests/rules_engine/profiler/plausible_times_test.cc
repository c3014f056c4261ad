#include "rules_engine/profiler/plausible_times.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace debugplane::rules_engine {
namespace {

using ::testing::HasSubstr;

constexpr double kDay = 86400;
// A job that ran a week before the evaluation (a replay).
constexpr double kRan = 1795300000;
const absl::Time kNow = absl::FromUnixSeconds(static_cast<int64_t>(kRan + 7 * kDay));

SystemMetricPoint Point(double t, double value = 50) {
  SystemMetricPoint p;
  p.timestamp = t;
  p.value = value;
  return p;
}

FrameworkEvent Event(double start_seconds, double seconds) {
  FrameworkEvent e;
  e.start_us = static_cast<int64_t>(start_seconds * 1e6);
  e.duration_us = static_cast<int64_t>(seconds * 1e6);
  return e;
}

std::vector<double> Times(const std::vector<SystemMetricPoint>& points) {
  std::vector<double> out;
  for (const SystemMetricPoint& p : points) out.push_back(p.timestamp);
  return out;
}

TEST(PlausibleTimesTest, KeepsAReplayedJobAndSkipsTheImplausibleTimes) {
  PlausibleTimes filter;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<SystemMetricPoint> points = {
      Point(1e300),           Point(kRan),     Point(0),
      Point(kRan + 1),        Point(-5),       Point(946684799),  // A second before 2000.
      Point(kRan + 2),        Point(nan),      Point(inf),
      Point(kRan + 3, nan),   Point(kRan + 4), Point(kRan + 9 * kDay),  // Two days ahead.
      Point(kRan - 40 * kDay)};  // In bounds, but far from the job's own samples.
  filter.FilterMetrics(&points, kNow);
  EXPECT_THAT(Times(points), ::testing::ElementsAre(kRan, kRan + 1, kRan + 2, kRan + 4));
  EXPECT_EQ(filter.skipped_metrics(), 9);
  ASSERT_TRUE(filter.anchor().has_value());
  EXPECT_NEAR(*filter.anchor(), kRan, 5);
  const std::string summary = filter.Summary();
  EXPECT_THAT(summary, HasSubstr("skipped 9 system metric samples with implausible times"));
  EXPECT_THAT(summary, HasSubstr("first: 1e+300"));
  EXPECT_THAT(summary, HasSubstr("2000-01-01"));
  EXPECT_THAT(summary, HasSubstr("30 days"));
}

TEST(PlausibleTimesTest, TheAnchorComesFromTheFirstBatchAndHoldsForBoth) {
  PlausibleTimes filter;
  // Evaluated two months after the job ran.
  const absl::Time later = absl::FromUnixSeconds(static_cast<int64_t>(kRan + 60 * kDay));
  std::vector<SystemMetricPoint> first = {Point(kRan), Point(kRan + 1)};
  filter.FilterMetrics(&first, later);
  EXPECT_EQ(first.size(), 2u);
  std::vector<FrameworkEvent> events = {
      Event(kRan + 10, 0.5), Event(kRan - 31 * kDay, 1),  // Too far before the job.
      Event(kRan + 20, 100 * 365 * kDay),                 // A century long.
      Event(kRan + 29 * kDay, 1),                         // A long job's late event.
  };
  filter.FilterEvents(&events, later);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].start_us, Event(kRan + 10, 0).start_us);
  EXPECT_EQ(filter.skipped_events(), 2);
  EXPECT_EQ(filter.skipped_metrics(), 0);
  EXPECT_THAT(filter.Summary(), HasSubstr("skipped 2 framework events"));
}

TEST(PlausibleTimesTest, NothingSkippedSaysNothing) {
  PlausibleTimes filter;
  std::vector<SystemMetricPoint> points = {Point(kRan)};
  filter.FilterMetrics(&points, kNow);
  std::vector<FrameworkEvent> none;
  filter.FilterEvents(&none, kNow);
  EXPECT_EQ(filter.Summary(), "");
}

TEST(PlausibleTimesTest, ABatchWithoutAPlausibleTimeSetsNoAnchor) {
  PlausibleTimes filter;
  std::vector<SystemMetricPoint> junk = {Point(0), Point(1e300)};
  filter.FilterMetrics(&junk, kNow);
  EXPECT_TRUE(junk.empty());
  EXPECT_FALSE(filter.anchor().has_value());
  std::vector<SystemMetricPoint> good = {Point(kRan)};
  filter.FilterMetrics(&good, kNow);
  EXPECT_EQ(good.size(), 1u);
  EXPECT_THAT(filter.Summary(), HasSubstr("skipped 2 system metric samples"));
}

}  // namespace
}  // namespace debugplane::rules_engine
