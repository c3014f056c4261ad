// Multi-resolution time buckets for the dashboard's series: level 0 holds
// buckets of kBaseSeconds (100 ms), level l buckets of kBaseSeconds * 2^l,
// bucket edges at multiples of the width (so a level-(l+1) bucket is exactly
// two level-l buckets). A query for [t0, t1] at W buckets reads the coarsest
// level that still has >= W buckets in the range: O(W) cells, never samples.
//
// Memory is bounded per level: each level keeps at most `capacity` buckets
// (the newest; a level is a sliding window), and a level is added on top when
// the top level would have to drop its oldest bucket, so the top level always
// covers the whole series. A series of span S costs about
// capacity * (1 + log2(S / (capacity * kBaseSeconds))) cells (16 bytes each):
// with the default capacity of 8192, a day is 8 levels, 1 MiB. Zooming into
// old data at a resolution whose level no longer holds it answers from the
// finest level that does (fewer buckets than asked: see ChooseLevel).
//
// Not thread-safe (the owner locks).

#ifndef DEBUGPLANE_RULES_ENGINE_INSIGHTS_BUCKET_PYRAMID_H_
#define DEBUGPLANE_RULES_ENGINE_INSIGHTS_BUCKET_PYRAMID_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <vector>

#include "rules_engine/report/value_aggregate.h"

namespace debugplane::rules_engine::insights {

inline constexpr double kBaseSeconds = 0.1;
inline constexpr int kDefaultLevelCapacity = 8192;

// The index of the level-`level` bucket holding time `t` (seconds).
inline int64_t BucketIndex(double t, int level) {
  return static_cast<int64_t>(std::floor(t * 10.0)) >> level;
}
// The start time of bucket `index` of level `level`.
inline double BucketStart(int64_t index, int level) {
  return static_cast<double>(index * (int64_t{1} << level)) / 10.0;
}
inline double BucketSeconds(int level) {
  return kBaseSeconds * static_cast<double>(int64_t{1} << level);
}

// Aggregates of the samples of one bucket (float: a series holds many);
// count 0: none.
using SampleCell = ValueAggregate<float, uint32_t>;

// Which cells a query reads: level, first bucket index, how many of that
// level's buckets and how many are merged into one output bucket.
struct LevelChoice {
  int level = 0;
  int64_t first = 0;  // Bucket index at `level` of the range's start.
  int64_t count = 0;  // Buckets of `level` in the range.
  int merge = 1;      // Output bucket = `merge` level buckets; ceil(count/merge) <= width.
  int64_t output_buckets() const { return (count + merge - 1) / merge; }
  double bucket_seconds() const { return BucketSeconds(level) * merge; }
  double output_start(int64_t i) const { return BucketStart(first + i * merge, level); }
};

// The level for [t0, t1] at `width` output buckets (width >= 1, t0 <= t1):
// the coarsest level with >= width buckets in the range (level 0 when none
// has; and no level whose buckets are wider than the range), then coarser while
// `complete_from(level)` says that level no longer holds data from `data_start` (the later of t0
// and the data's first time) on, up to `levels - 1`. merge = ceil(count / width).
// `complete_from(level)` is the first bucket index the level holds all data
// of (kNoEviction when it lost nothing).
// REQUIRES: 0 <= t0 <= t1 <= 1e15, so that no bucket index or count
// overflows (JobInsights clamps every query to [0, kLatestTime]); then
// output_buckets() <= width.
template <typename CompleteFrom>
LevelChoice ChooseLevel(double t0, double t1, int width, double data_start, int levels,
                        CompleteFrom complete_from) {
  LevelChoice c;
  int level = 0;
  // Never buckets wider than the range (a width of 1 would climb forever).
  const double span = std::max(t1 - t0, kBaseSeconds);
  while (level + 1 < 62 && BucketSeconds(level + 1) <= span &&
         BucketIndex(t1, level + 1) - BucketIndex(t0, level + 1) + 1 >= width) {
    ++level;
  }
  const double from = std::max(t0, data_start);
  while (level + 1 < levels && complete_from(level) > BucketIndex(from, level)) ++level;
  c.level = level;
  c.first = BucketIndex(t0, level);
  c.count = BucketIndex(t1, level) - c.first + 1;
  c.merge = static_cast<int>(std::max<int64_t>(1, (c.count + width - 1) / width));
  return c;
}

inline constexpr int64_t kNoEviction = std::numeric_limits<int64_t>::min();

// A sliding window of cells of one level: index first_ .. first_+size-1.
template <typename Cell>
class LevelWindow {
 public:
  // The cell of `index`, created (with empty cells in any gap) if needed;
  // nullptr if it lies before what the window holds and cannot be prepended
  // (older than complete_from(), or prepending would pass `capacity`), or
  // if creating it would evict while `may_evict` is false.
  Cell* At(int64_t index, int capacity, bool may_evict);
  // The cell of `index`, or nullptr if the window has none.
  const Cell* Find(int64_t index) const {
    if (cells_.empty() || index < first_ || index >= first_ + Size()) return nullptr;
    return &cells_[static_cast<size_t>(index - first_)];
  }
  int64_t first() const { return first_; }
  int64_t Size() const { return static_cast<int64_t>(cells_.size()); }
  bool empty() const { return cells_.empty(); }
  int64_t complete_from() const { return complete_from_; }
  const std::deque<Cell>& cells() const { return cells_; }

 private:
  std::deque<Cell> cells_;
  int64_t first_ = 0;
  int64_t complete_from_ = kNoEviction;
};

// What both pyramids keep: their levels (sliding windows of Cell), finest
// first, each at most `capacity` cells, and the span of the times added.
template <typename Cell>
class PyramidLevels {
 public:
  int levels() const { return static_cast<int>(levels_.size()); }
  int64_t complete_from(int level) const {
    return level < levels() ? levels_[level].complete_from() : kNoEviction;
  }
  double first_time() const { return first_time_; }
  double last_time() const { return last_time_; }

 protected:
  explicit PyramidLevels(int capacity) : capacity_(capacity) {}
  // The bytes of the cells the levels hold.
  size_t CellBytes() const {
    size_t bytes = 0;
    for (const auto& level : levels_) bytes += level.cells().size() * sizeof(Cell);
    return bytes;
  }

  int capacity_;
  std::vector<LevelWindow<Cell>> levels_;
  double first_time_ = 0;
  double last_time_ = 0;
};

// Samples (min, max, mean per bucket). Closed buckets are merged into the
// level above when time moves past them, so an in-order sample costs O(1)
// amortized; a late sample (older than the newest bucket) is added to each
// level until it reaches that level's open bucket, O(levels).
class SamplePyramid : public PyramidLevels<SampleCell> {
 public:
  explicit SamplePyramid(int capacity = kDefaultLevelCapacity) : PyramidLevels(capacity) {}

  // Adds one sample; non-finite values or times are ignored. A sample older
  // than every level holds is dropped (counted in dropped()).
  void Add(double t, double value);

  // The aggregates of output buckets 0 .. choice.output_buckets()-1 of
  // `choice` (cells without samples have count 0), appended to `out`.
  void Read(const LevelChoice& choice, std::vector<SampleCell>* out) const;

  bool empty() const { return samples_ == 0; }
  int64_t samples() const { return samples_; }
  int64_t dropped() const { return dropped_; }
  size_t memory_bytes() const;

 private:
  // Merges the level-l bucket(s) being closed when the newest base bucket
  // becomes `index`.
  void Advance(int64_t index);
  // The cell of `index` at `level`, adding a level on top instead of
  // evicting from the top level.
  SampleCell* CellAt(int level, int64_t index);
  void AddLevel();

  int64_t open_ = 0;  // The newest base bucket index (the open chain: open_ >> l).
  int64_t samples_ = 0;
  int64_t dropped_ = 0;
};

// Busy time (seconds of a bucket during which something ran), added to
// every level directly: an interval costs the buckets it spans per level.
class BusyPyramid : public PyramidLevels<float> {
 public:
  explicit BusyPyramid(int capacity = kDefaultLevelCapacity) : PyramidLevels(capacity) {}

  // Adds the interval [start, end) (seconds); empty or non-finite ones are
  // ignored. Parts older than a level holds are left out of that level.
  void AddInterval(double start, double end);

  // Busy seconds of each output bucket of `choice`, appended to `out`.
  void Read(const LevelChoice& choice, std::vector<double>* out) const;

  bool empty() const { return intervals_ == 0; }
  size_t memory_bytes() const;

 private:
  void AddLevel();
  void AddToLevel(int level, double start, double end);

  int64_t intervals_ = 0;
};

}  // namespace debugplane::rules_engine::insights

#endif  // DEBUGPLANE_RULES_ENGINE_INSIGHTS_BUCKET_PYRAMID_H_
