#include "rules_engine/tensor_rules/histogram_stats.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "rules_engine/tensor_rules/rule_internal.h"

namespace debugplane::rules_engine::internal {

absl::optional<Bounds> MeanAbsBounds(const HistogramStats& h) {
  if (!(h.num > 0)) return absl::nullopt;
  Bounds b{0, std::max(std::fabs(h.min), std::fabs(h.max))};
  // From the buckets: each value lies in (lower edge, upper edge] clipped to [min, max].
  double counted = 0, low = 0, high = 0;
  double lower = h.min;
  for (size_t i = 0; i < h.bucket.size() && i < h.bucket_limit.size(); ++i) {
    const double upper = std::min(h.bucket_limit[i], h.max);
    const double c = h.bucket[i];
    if (c > 0) {
      const double lo = std::max(lower, h.min), hi = std::max(upper, lo);
      const double nearest = lo <= 0 && hi >= 0 ? 0 : std::min(std::fabs(lo), std::fabs(hi));
      low += c * nearest;
      high += c * std::max(std::fabs(lo), std::fabs(hi));
      counted += c;
    }
    lower = std::max(lower, h.bucket_limit[i]);
  }
  if (counted > 0) {
    b.low = low / counted;
    b.high = std::min(b.high, high / counted);
  }
  if (h.exact_moments) {
    b.low = std::max(b.low, std::fabs(h.sum) / h.num);
    b.high = std::min(b.high, std::sqrt(std::max(0.0, h.sum_squares) / h.num));
  }
  if (b.high < b.low) b.high = b.low;  // Rounding; or inconsistent data.
  return b;
}

absl::optional<double> HistogramVariance(const HistogramStats& h) {
  if (!(h.num > 0)) return absl::nullopt;
  const double mean = h.sum / h.num;
  return std::max(0.0, h.sum_squares / h.num - mean * mean);
}

absl::optional<ZeroShare> HistogramZeroShare(const HistogramStats& h) {
  if (!(h.num > 0)) return absl::nullopt;
  if ((h.exact_moments && h.sum_squares == 0) || (h.min == 0 && h.max == 0)) {
    return ZeroShare{1, true};
  }
  if (h.min > 0 || h.max < 0) return ZeroShare{0, true};
  double lower = -INFINITY;
  for (size_t i = 0; i < h.bucket.size() && i < h.bucket_limit.size(); ++i) {
    if (lower < 0 && h.bucket_limit[i] >= 0) return ZeroShare{h.bucket[i] / h.num, false};
    lower = h.bucket_limit[i];
  }
  return ZeroShare{1, false};  // No bucket says: at most all.
}

absl::optional<std::string> HistogramNonFinite(const HistogramStats& h, bool only_nan) {
  const std::pair<const char*, double> fields[] = {{"min", h.min}, {"max", h.max}, {"sum", h.sum}};
  for (const auto& [name, v] : fields) {
    if (std::isnan(v) || (!only_nan && std::isinf(v))) {
      return absl::StrCat("histogram ", name, " is ", Num(v));
    }
  }
  return absl::nullopt;
}

std::vector<double> HistogramSignature(const HistogramStats& h) {
  return {h.min, h.max, h.num, h.sum, h.sum_squares};
}

}  // namespace debugplane::rules_engine::internal
