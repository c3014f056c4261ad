#include "rules_engine/query/tensor_series.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <utility>

#include "base/double2.h"

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

std::vector<SeriesPoint> BucketOneMode(std::vector<SeriesPoint> points, size_t max_points) {
  if (points.size() <= max_points) return points;  // Moved, not copied.
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
// sum, sum of squares, min and max, and how many are not finite. Kept in
// kLanes interleaved lanes (element i in lane i % kLanes) and added up in a
// fixed order at the end: one sequential sum was a chain of dependent
// additions (four cycles per element, 36% of a query's CPU over
// 1M-element tensors), while lanes pipeline and vectorize. The same values
// give the same results by either path below.
constexpr size_t kLanes = 4;
struct Lanes {
  double sum[kLanes] = {}, squares[kLanes] = {};
  double lo[kLanes] = {INFINITY, INFINITY, INFINITY, INFINITY};
  double hi[kLanes] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
  int64_t non_finite = 0;
};

// values[begin, end) into their lanes, each element checked: a NaN or an
// infinity is counted and adds nothing.
// Values: a layout reader of TensorValues::Visit (values[i] widened to double).
template <typename Values>
void TakeChecked(Lanes& lanes, const Values& values, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    const size_t lane = i % kLanes;
    const double v = values[i];
    if (!std::isfinite(v)) {
      ++lanes.non_finite;
      continue;
    }
    lanes.sum[lane] += v;
    lanes.squares[lane] += v * v;
    lanes.lo[lane] = v < lanes.lo[lane] ? v : lanes.lo[lane];
    lanes.hi[lane] = lanes.hi[lane] < v ? v : lanes.hi[lane];
  }
}

// Two vectors (base/double2.h) per quantity: the four lanes.
using base::Double2;
using base::HigherDouble2;
using base::LoadDouble2;
using base::LowerDouble2;
using base::StoreDouble2;

// values[0, n) known finite (Tensor::facts): as TakeChecked without the
// checks, kLanes elements at a time; the last n % kLanes by TakeChecked.
template <typename Values>
void TakeFinite(Lanes& lanes, const Values& values, size_t n) {
  Double2 sum0 = LoadDouble2(lanes.sum), sum1 = LoadDouble2(lanes.sum + 2);
  Double2 sq0 = LoadDouble2(lanes.squares), sq1 = LoadDouble2(lanes.squares + 2);
  Double2 lo0 = LoadDouble2(lanes.lo), lo1 = LoadDouble2(lanes.lo + 2);
  Double2 hi0 = LoadDouble2(lanes.hi), hi1 = LoadDouble2(lanes.hi + 2);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const Double2 x0 = {values[i], values[i + 1]};
    const Double2 x1 = {values[i + 2], values[i + 3]};
    sum0 += x0;
    sum1 += x1;
    sq0 += x0 * x0;
    sq1 += x1 * x1;
    lo0 = LowerDouble2(x0, lo0);
    lo1 = LowerDouble2(x1, lo1);
    hi0 = HigherDouble2(x0, hi0);
    hi1 = HigherDouble2(x1, hi1);
  }
  StoreDouble2(lanes.sum, sum0);
  StoreDouble2(lanes.sum + 2, sum1);
  StoreDouble2(lanes.squares, sq0);
  StoreDouble2(lanes.squares + 2, sq1);
  StoreDouble2(lanes.lo, lo0);
  StoreDouble2(lanes.lo + 2, lo1);
  StoreDouble2(lanes.hi, hi0);
  StoreDouble2(lanes.hi + 2, hi1);
  TakeChecked(lanes, values, i, n);
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
  Lanes lanes;
  const size_t n = tensor.values.size();
  if (tensor.facts.has_value() && tensor.facts->all_finite) {
    tensor.values.Visit([&](const auto& values) { TakeFinite(lanes, values, n); });
  } else {
    tensor.values.Visit([&](const auto& values) { TakeChecked(lanes, values, 0, n); });
  }
  point.non_finite = lanes.non_finite;
  if (lanes.non_finite < static_cast<int64_t>(n)) {
    const double sum = (lanes.sum[0] + lanes.sum[2]) + (lanes.sum[1] + lanes.sum[3]);
    const double squares =
        (lanes.squares[0] + lanes.squares[2]) + (lanes.squares[1] + lanes.squares[3]);
    point.mean = sum / static_cast<double>(static_cast<int64_t>(n) - lanes.non_finite);
    point.norm = std::sqrt(squares);
    point.min = *std::min_element(lanes.lo, lanes.lo + kLanes);
    point.max = *std::max_element(lanes.hi, lanes.hi + kLanes);
  }
  return point;
}

std::vector<SeriesPoint> BucketByMode(std::vector<SeriesPoint> points, size_t max_points) {
  std::map<Mode, std::vector<SeriesPoint>> by_mode;
  for (SeriesPoint& p : points) by_mode[p.mode].push_back(std::move(p));
  // One step's point each at most twice at a time (by mode, then bucketed),
  // not three times: a long series is a point per step read.
  points = std::vector<SeriesPoint>();
  std::vector<SeriesPoint> out;
  for (auto& [mode, series] : by_mode) {
    std::vector<SeriesPoint> bucketed = BucketOneMode(std::move(series), max_points);
    out.insert(out.end(), std::make_move_iterator(bucketed.begin()),
               std::make_move_iterator(bucketed.end()));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const SeriesPoint& a, const SeriesPoint& b) { return a.step < b.step; });
  return out;
}

}  // namespace debugplane::rules_engine
