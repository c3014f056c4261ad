// A tensor's values over steps as a chart draws them: one point per step
// (the value of a scalar; mean, L2 norm, min, max and the count of non-finite
// elements of any tensor; the statistics and buckets of a TensorBoard
// histogram), and the reduction of a long series to at most N points by
// bucketing steps, keeping each bucket's min and max.

#ifndef DEBUGPLANE_RULES_ENGINE_QUERY_TENSOR_SERIES_H_
#define DEBUGPLANE_RULES_ENGINE_QUERY_TENSOR_SERIES_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rules_engine/smdebug/step.h"

namespace debugplane::rules_engine {

// One step of one tensor in one mode, or a bucket of consecutive such steps.
struct SeriesPoint {
  int64_t step = 0;  // Global step (a bucket's first).
  Mode mode = Mode::kGlobal;
  int64_t mode_step = 0;  // The first step's.
  int64_t last_step = 0;  // A bucket's last global step (== step for one step).
  int64_t step_count = 1;
  // Set for a tensor of one element: that element, NaN and infinities
  // included; for a bucket, the mean of its steps' finite values (unset if
  // none is finite).
  std::optional<double> value;
  // Over the finite elements, unset if there is none. A bucket: mean of the
  // steps' means and norms, min of the minima, max of the maxima.
  std::optional<double> mean, norm, min, max;
  int64_t non_finite = 0;  // NaN or infinite elements (a bucket: summed).
  int64_t elements = 0;    // Elements of the tensor (a bucket: the first step's).
  std::string worker;
  // A tensor logged as a histogram (Tensor::histogram): its buckets, as
  // HistogramStats has them (a bucket of steps: its last step's).
  std::vector<double> bucket_limits, bucket_counts;
};

// The point of `tensor` saved at (`step`, `mode`, `mode_step`). A tensor saved
// without values (or of a dtype without numbers, e.g. strings) has no value
// and no reductions, only its element count. A histogram gives what it
// holds: mean (sum / num), norm (sqrt(sum_squares)), min and max, each only
// when finite, its buckets, and num as the element count; non_finite is 1
// when its min, max, sum or sum_squares is NaN or infinite (some value was;
// how many, a histogram does not say).
// The sums behind mean and norm are taken in 4 interleaved lanes added up
// in a fixed order (one pass, widened one value at a time): over a
// large tensor they may differ from one sequential sum in the last bits,
// never between two reads of the same values; a tensor of one element has
// its value as mean exactly. min, max and the counts are exact.
SeriesPoint ReduceTensor(const Tensor& tensor, int64_t step, Mode mode, int64_t mode_step);

// Reduces `points` (ascending steps, any modes mixed) to at most
// `max_points` per mode: each mode's steps, if more than `max_points`, are
// cut into buckets of equal width in global steps, starting at its first
// step (width = ceil((last - first + 1) / max_points)), and each non-empty
// bucket becomes one point. The result is in ascending step order.
// REQUIRES: max_points >= 1.
std::vector<SeriesPoint> BucketByMode(std::vector<SeriesPoint> points, size_t max_points);

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_QUERY_TENSOR_SERIES_H_
