#include "rules_engine/query/tensor_series.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <utility>

namespace debugplane::rules_engine {
namespace {

// The mean of the values of `field` present in points[begin, end).
std::optional<double> MeanOf(const std::vector<SeriesPoint>& points, size_t begin, size_t end,
                             std::optional<double> SeriesPoint::*field, bool finite_only) {
  double sum = 0;
  int64_t count = 0;
  for (size_t i = begin; i < end; ++i) {
    const std::optional<double>& v = points[i].*field;
    if (!v || (finite_only && !std::isfinite(*v))) continue;
    sum += *v;
    ++count;
  }
  if (count == 0) return std::nullopt;
  return sum / static_cast<double>(count);
}

// One point standing for points[begin, end) (one mode, ascending steps).
SeriesPoint MergeBucket(const std::vector<SeriesPoint>& points, size_t begin, size_t end) {
  SeriesPoint merged = points[begin];
  merged.last_step = points[end - 1].last_step;
  merged.step_count = 0;
  merged.non_finite = 0;
  merged.min.reset();
  merged.max.reset();
  for (size_t i = begin; i < end; ++i) {
    const SeriesPoint& p = points[i];
    merged.step_count += p.step_count;
    merged.non_finite += p.non_finite;
    if (p.min) merged.min = merged.min ? std::min(*merged.min, *p.min) : *p.min;
    if (p.max) merged.max = merged.max ? std::max(*merged.max, *p.max) : *p.max;
  }
  merged.mean = MeanOf(points, begin, end, &SeriesPoint::mean, false);
  merged.norm = MeanOf(points, begin, end, &SeriesPoint::norm, false);
  const bool has_value = std::any_of(points.begin() + begin, points.begin() + end,
                                     [](const SeriesPoint& p) { return p.value.has_value(); });
  merged.value = has_value ? MeanOf(points, begin, end, &SeriesPoint::value, true) : std::nullopt;
  merged.bucket_limits = points[end - 1].bucket_limits;
  merged.bucket_counts = points[end - 1].bucket_counts;
  return merged;
}

// How far `step` lies after `first` (REQUIRES: step >= first), exact over
// the whole int64 range: the steps come from the trial's files, and
// -9e18 .. 9e18 must not overflow a signed difference.
uint64_t StepsAfter(int64_t first, int64_t step) {
  return static_cast<uint64_t>(step) - static_cast<uint64_t>(first);
}

std::vector<SeriesPoint> BucketOneMode(const std::vector<SeriesPoint>& points, size_t max_points) {
  if (points.size() <= max_points) return points;
  const int64_t first = points.front().step;
  // ceil((distance + 1) / max_points), written so that distance + 1 cannot
  // wrap when the steps span all of int64.
  const uint64_t width = StepsAfter(first, points.back().step) / max_points + 1;
  std::vector<SeriesPoint> out;
  size_t begin = 0;
  while (begin < points.size()) {
    const uint64_t bucket = StepsAfter(first, points[begin].step) / width;
    size_t end = begin + 1;
    while (end < points.size() && StepsAfter(first, points[end].step) / width == bucket) ++end;
    out.push_back(MergeBucket(points, begin, end));
    begin = end;
  }
  return out;
}

// A histogram's point: only what it holds (see ReduceTensor).
void ReduceHistogram(const HistogramStats& histogram, SeriesPoint& point) {
  auto finite = [](double v) { return std::isfinite(v) ? std::optional<double>(v) : std::nullopt; };
  point.elements = histogram.num >= static_cast<double>(std::numeric_limits<int64_t>::max())
                       ? std::numeric_limits<int64_t>::max()
                       : static_cast<int64_t>(std::max(0.0, histogram.num));
  const bool all_finite = std::isfinite(histogram.min) && std::isfinite(histogram.max) &&
                          std::isfinite(histogram.sum) && std::isfinite(histogram.sum_squares);
  point.non_finite = all_finite ? 0 : 1;
  if (histogram.num > 0) {
    point.mean = finite(histogram.sum / histogram.num);
    point.min = finite(histogram.min);
    point.max = finite(histogram.max);
  }
  if (histogram.sum_squares >= 0) point.norm = finite(std::sqrt(histogram.sum_squares));
  point.bucket_limits = histogram.bucket_limit;
  point.bucket_counts = histogram.bucket;
}

// What ReduceTensor needs of a tensor's values: over the finite ones, their
// sum, sum of squares, min and max, and how many there are.
struct ValueMoments {
  double sum = 0, squares = 0;
  double lo = INFINITY, hi = -INFINITY;
  int64_t finite = 0, non_finite = 0;
};

// One pass over `values[0, n)`, widened one value at a time. The sums run
// in kLanes interleaved lanes, added up in a fixed order at the end: one
// sequential sum was a chain of dependent additions (four cycles per
// element, 36% of a query's CPU over 1M-element tensors), while lanes
// pipeline and vectorize. kAllFinite: the decoder found no NaN or infinity
// (Tensor::facts), so no element needs checking; both forms give the same
// results on finite values (a non-finite element adds 0 to its lane).
template <bool kAllFinite, typename Value>
ValueMoments MomentsOf(const Value* values, size_t n) {
  constexpr size_t kLanes = 8;
  double sum[kLanes] = {}, squares[kLanes] = {};
  double lo[kLanes], hi[kLanes];
  int64_t non_finite[kLanes] = {};
  std::fill(lo, lo + kLanes, INFINITY);
  std::fill(hi, hi + kLanes, -INFINITY);
  const auto take = [&](size_t lane, double v) {
    double low = v, high = v;
    if constexpr (!kAllFinite) {
      const bool finite = std::isfinite(v);
      non_finite[lane] += finite ? 0 : 1;
      v = finite ? v : 0.0;
      low = finite ? v : INFINITY;
      high = finite ? v : -INFINITY;
    }
    sum[lane] += v;
    squares[lane] += v * v;
    lo[lane] = low < lo[lane] ? low : lo[lane];
    hi[lane] = hi[lane] < high ? high : hi[lane];
  };
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t lane = 0; lane < kLanes; ++lane) take(lane, static_cast<double>(values[i + lane]));
  }
  for (size_t lane = 0; i < n; ++i, ++lane) take(lane, static_cast<double>(values[i]));
  ValueMoments m;
  // Pairwise, in a fixed order: the same values always give the same sums.
  for (size_t width = kLanes / 2; width >= 1; width /= 2) {
    for (size_t lane = 0; lane < width; ++lane) {
      sum[lane] = sum[2 * lane] + sum[2 * lane + 1];
      squares[lane] = squares[2 * lane] + squares[2 * lane + 1];
    }
  }
  m.sum = sum[0];
  m.squares = squares[0];
  for (size_t lane = 0; lane < kLanes; ++lane) {
    m.lo = std::min(m.lo, lo[lane]);
    m.hi = std::max(m.hi, hi[lane]);
    m.non_finite += non_finite[lane];
  }
  m.finite = static_cast<int64_t>(n) - m.non_finite;
  return m;
}

}  // namespace

SeriesPoint ReduceTensor(const Tensor& tensor, int64_t step, Mode mode, int64_t mode_step) {
  SeriesPoint point;
  point.step = step;
  point.last_step = step;
  point.mode = mode;
  point.mode_step = mode_step;
  point.worker = tensor.worker;
  if (tensor.histogram) {
    ReduceHistogram(*tensor.histogram, point);
    return point;
  }
  // The shape is the file's word: a product past int64 saturates instead of
  // overflowing (the element count is only shown).
  int64_t elements = 1;
  for (const int64_t dim : tensor.shape) {
    if (__builtin_mul_overflow(elements, dim, &elements)) {
      elements = std::numeric_limits<int64_t>::max();
      break;
    }
  }
  point.elements = tensor.values.empty() ? elements : static_cast<int64_t>(tensor.values.size());
  if (tensor.values.empty()) return point;
  if (tensor.values.size() == 1) point.value = tensor.values.front();
  const bool all_finite = tensor.facts.has_value() && tensor.facts->all_finite;
  const ValueMoments moments =
      all_finite ? MomentsOf<true>(tensor.values.data(), tensor.values.size())
                 : MomentsOf<false>(tensor.values.data(), tensor.values.size());
  point.non_finite = moments.non_finite;
  if (moments.finite > 0) {
    point.mean = moments.sum / static_cast<double>(moments.finite);
    point.norm = std::sqrt(moments.squares);
    point.min = moments.lo;
    point.max = moments.hi;
  }
  return point;
}

std::vector<SeriesPoint> BucketByMode(std::vector<SeriesPoint> points, size_t max_points) {
  std::map<Mode, std::vector<SeriesPoint>> by_mode;
  for (SeriesPoint& p : points) by_mode[p.mode].push_back(std::move(p));
  std::vector<SeriesPoint> out;
  for (const auto& [mode, series] : by_mode) {
    std::vector<SeriesPoint> bucketed = BucketOneMode(series, max_points);
    out.insert(out.end(), std::make_move_iterator(bucketed.begin()),
               std::make_move_iterator(bucketed.end()));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const SeriesPoint& a, const SeriesPoint& b) { return a.step < b.step; });
  return out;
}

}  // namespace debugplane::rules_engine
