#include "rules_engine/insights/bucket_pyramid.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace debugplane::rules_engine::insights {
namespace {

struct Sample {
  double t;
  double value;
};

LevelChoice Choose(const SamplePyramid& p, double t0, double t1, int width) {
  return ChooseLevel(t0, t1, width, p.first_time(), p.levels(),
                     [&p](int level) { return p.complete_from(level); });
}

// The output bucket a sample falls in by the choice's own definition,
// computed from the base index (independent of the pyramid's levels).
int64_t OutputBucketOf(const LevelChoice& c, double t) {
  const int64_t base = static_cast<int64_t>(std::floor(t * 10.0));
  const int64_t at_level = base >> c.level;
  const int64_t offset = at_level - c.first;
  if (offset < 0) return -1;
  return offset / c.merge;
}

// Brute force: min, max, mean and count per output bucket over the raw
// samples, compared with the pyramid's cells.
void ExpectMatchesBruteForce(const SamplePyramid& p, const std::vector<Sample>& samples,
                             const LevelChoice& c) {
  std::vector<SampleCell> cells;
  p.Read(c, &cells);
  ASSERT_EQ(static_cast<int64_t>(cells.size()), c.output_buckets());
  struct Expected {
    double min = 0, max = 0, sum = 0;
    int64_t count = 0;
  };
  std::vector<Expected> expected(cells.size());
  for (const Sample& s : samples) {
    const int64_t i = OutputBucketOf(c, s.t);
    if (i < 0 || i >= static_cast<int64_t>(cells.size())) continue;
    Expected& e = expected[static_cast<size_t>(i)];
    const double v = static_cast<float>(s.value);
    if (e.count == 0) e.min = e.max = v;
    e.min = std::min(e.min, v);
    e.max = std::max(e.max, v);
    e.sum += v;
    ++e.count;
  }
  for (size_t i = 0; i < cells.size(); ++i) {
    SCOPED_TRACE(testing::Message()
                 << "bucket " << i << " level " << c.level << " merge " << c.merge);
    ASSERT_EQ(cells[i].count, expected[i].count);
    if (expected[i].count == 0) continue;
    EXPECT_EQ(cells[i].min, expected[i].min);
    EXPECT_EQ(cells[i].max, expected[i].max);
    EXPECT_NEAR(cells[i].sum / cells[i].count, expected[i].sum / expected[i].count,
                1e-4 * (1 + std::fabs(expected[i].sum / expected[i].count)));
  }
}

// Samples every ~100 ms over `seconds`, in time order with some late ones.
std::vector<Sample> RandomSamples(std::mt19937_64& rng, double start, double seconds,
                                  double late_share) {
  std::uniform_real_distribution<double> value(0, 100);
  std::uniform_real_distribution<double> jitter(0, 0.1);
  std::uniform_real_distribution<double> coin(0, 1);
  std::vector<Sample> samples;
  for (double t = start; t < start + seconds; t += 0.1) {
    samples.push_back({t + jitter(rng), value(rng)});
  }
  // Move some samples later in the arrival order (late arrivals).
  for (size_t i = 0; i + 50 < samples.size(); ++i) {
    if (coin(rng) < late_share) std::swap(samples[i], samples[i + 1 + rng() % 40]);
  }
  return samples;
}

TEST(SamplePyramidTest, MatchesBruteForceAtRandomRangesAndWidths) {
  std::mt19937_64 rng(42);
  const double start = 1795300000.0;
  const std::vector<Sample> samples = RandomSamples(rng, start, 600, 0.02);
  SamplePyramid p;  // Default capacity: nothing is evicted in 600 s.
  for (const Sample& s : samples) p.Add(s.t, s.value);
  EXPECT_EQ(p.samples(), static_cast<int64_t>(samples.size()));
  EXPECT_EQ(p.dropped(), 0);
  std::uniform_real_distribution<double> at(start - 10, start + 610);
  std::uniform_int_distribution<int> width(1, 4000);
  for (int round = 0; round < 200; ++round) {
    double t0 = at(rng), t1 = at(rng);
    if (t1 < t0) std::swap(t0, t1);
    const int w = width(rng);
    const LevelChoice c = Choose(p, t0, t1, w);
    SCOPED_TRACE(testing::Message() << "t0 " << t0 << " t1 " << t1 << " width " << w);
    EXPECT_LE(c.output_buckets(), w);
    // The coarsest level with at least `width` buckets (or level 0).
    EXPECT_TRUE(c.count >= w || c.level == 0);
    EXPECT_TRUE(BucketIndex(t1, c.level + 1) - BucketIndex(t0, c.level + 1) + 1 < w ||
                BucketSeconds(c.level + 1) > std::max(t1 - t0, kBaseSeconds));
    ExpectMatchesBruteForce(p, samples, c);
  }
}

TEST(SamplePyramidTest, SmallCapacityEvictsFineLevelsButKeepsEverythingCoarse) {
  std::mt19937_64 rng(7);
  const double start = 1795300000.0;
  const std::vector<Sample> samples = RandomSamples(rng, start, 3000, 0.01);
  SamplePyramid p(/*capacity=*/256);
  for (const Sample& s : samples) p.Add(s.t, s.value);
  EXPECT_EQ(p.dropped(), 0);
  // 30000 base buckets in windows of 256: levels up to where one covers all.
  EXPECT_GE(p.levels(), 8);
  EXPECT_GT(p.complete_from(0), BucketIndex(start, 0));  // Level 0 dropped the old buckets.
  EXPECT_EQ(p.complete_from(p.levels() - 1), kNoEviction);
  // The whole range, and zooms into old and new data: every sample counted.
  for (auto [t0, t1, w] :
       std::vector<std::tuple<double, double, int>>{{start, start + 3000, 1000},
                                                    {start + 10, start + 20, 100},
                                                    {start + 2990, start + 3000, 100},
                                                    {start + 1000, start + 1500, 4000}}) {
    const LevelChoice c = Choose(p, t0, t1, w);
    SCOPED_TRACE(testing::Message() << "t0 " << t0 << " t1 " << t1 << " width " << w);
    ExpectMatchesBruteForce(p, samples, c);
  }
  // Recent data at full resolution; old data from a coarser level.
  EXPECT_EQ(Choose(p, start + 2990, start + 3000, 100).level, 0);
  EXPECT_GT(Choose(p, start + 10, start + 20, 100).level, 0);
}

TEST(SamplePyramidTest, EmptyBucketsAndGaps) {
  SamplePyramid p;
  const double start = 1795300000.0;
  for (int i = 0; i < 100; ++i) p.Add(start + i * 0.1, i);
  for (int i = 0; i < 100; ++i) p.Add(start + 500 + i * 0.1, 1000 + i);  // After a gap.
  const LevelChoice c = Choose(p, start, start + 510, 51);
  std::vector<SampleCell> cells;
  p.Read(c, &cells);
  ASSERT_EQ(static_cast<int64_t>(cells.size()), c.output_buckets());
  int64_t empty = 0, total = 0;
  for (const SampleCell& cell : cells) {
    empty += cell.count == 0;
    total += cell.count;
  }
  EXPECT_EQ(total, 200);
  EXPECT_GT(empty, static_cast<int64_t>(cells.size()) / 2);
  EXPECT_EQ(cells.front().min, 0);
  // A range before every sample: all empty.
  std::vector<SampleCell> before;
  p.Read(Choose(p, start - 100, start - 50, 10), &before);
  for (const SampleCell& cell : before) EXPECT_EQ(cell.count, 0);
}

TEST(SamplePyramidTest, IgnoresNonFinite) {
  SamplePyramid p;
  p.Add(NAN, 1);
  p.Add(1795300000.0, INFINITY);
  EXPECT_TRUE(p.empty());
}

TEST(BusyPyramidTest, MatchesBruteForceOverlaps) {
  std::mt19937_64 rng(3);
  const double start = 1795300000.0;
  std::uniform_real_distribution<double> at(start, start + 1200);
  std::exponential_distribution<double> length(5.0);  // Mean 200 ms.
  std::vector<std::pair<double, double>> intervals;
  for (int i = 0; i < 5000; ++i) {
    const double s = at(rng);
    intervals.emplace_back(s, s + length(rng));
  }
  intervals.emplace_back(start + 100, start + 700);  // A long one.
  std::sort(intervals.begin(), intervals.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });  // As written.
  for (int capacity : {kDefaultLevelCapacity, 512}) {
    BusyPyramid p(capacity);
    for (const auto& [s, e] : intervals) p.AddInterval(s, e);
    for (auto [t0, t1, w] :
         std::vector<std::tuple<double, double, int>>{{start, start + 1200, 800},
                                                      {start + 1100, start + 1150, 500},
                                                      {start, start + 1200, 7}}) {
      const LevelChoice c = ChooseLevel(t0, t1, w, p.first_time(), p.levels(),
                                        [&p](int level) { return p.complete_from(level); });
      std::vector<double> busy;
      p.Read(c, &busy);
      ASSERT_EQ(static_cast<int64_t>(busy.size()), c.output_buckets());
      for (size_t i = 0; i < busy.size(); ++i) {
        const double lo = c.output_start(static_cast<int64_t>(i));
        const double hi = c.output_start(static_cast<int64_t>(i) + 1);
        double expected = 0;
        for (const auto& [s, e] : intervals)
          expected += std::max(0.0, std::min(e, hi) - std::max(s, lo));
        EXPECT_NEAR(busy[i], expected, 1e-3 * (1 + expected))
            << "capacity " << capacity << " bucket " << i << " of " << busy.size();
      }
    }
  }
}

}  // namespace
}  // namespace debugplane::rules_engine::insights
