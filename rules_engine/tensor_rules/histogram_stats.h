// What rules can compute from a tensor logged as its histogram
// (Tensor::histogram, TensorBoard's HistogramProto and TF2's [k, 3] form):
// exact answers where the histogram holds them, bounds where it does not.

#ifndef DEBUGPLANE_RULES_ENGINE_TENSOR_RULES_HISTOGRAM_STATS_H_
#define DEBUGPLANE_RULES_ENGINE_TENSOR_RULES_HISTOGRAM_STATS_H_

#include <string>
#include <vector>

#include "absl/types/optional.h"
#include "rules_engine/smdebug/step.h"

namespace debugplane::rules_engine::internal {

// Bounds on mean |x| over the histogram's values: each bucket's values lie
// between its edges (the first from min, the last to max), and with exact
// moments |sum| / num <= mean |x| <= sqrt(sum_squares / num). low == high
// when the histogram settles it. nullopt for an empty histogram (num 0).
struct Bounds {
  double low = 0;
  double high = 0;
};
absl::optional<Bounds> MeanAbsBounds(const HistogramStats& h);

// The population variance: sum_squares / num - mean^2 (estimated from the
// bucket centres without exact moments). nullopt for num 0.
absl::optional<double> HistogramVariance(const HistogramStats& h);

// The share (0..1) of values that are zero, when the histogram settles it:
// 1 when every value is 0 (sum_squares 0 with exact moments, or min = max =
// 0), else at most the share of the bucket that holds 0; `exact` says which.
struct ZeroShare {
  double share = 0;
  bool exact = false;
};
absl::optional<ZeroShare> HistogramZeroShare(const HistogramStats& h);

// "min", "max" or "sum" and its value, for the first of them that is NaN
// (or infinite unless `only_nan`); nullopt when all are finite.
absl::optional<std::string> HistogramNonFinite(const HistogramStats& h, bool only_nan);

// min, max, num, sum, sum_squares: what two saves of a histogram are
// compared by (UnchangedTensor).
std::vector<double> HistogramSignature(const HistogramStats& h);

}  // namespace debugplane::rules_engine::internal

#endif  // DEBUGPLANE_RULES_ENGINE_TENSOR_RULES_HISTOGRAM_STATS_H_
