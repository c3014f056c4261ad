#include "rules_engine/rule/percentile.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace debugplane::rules_engine {
namespace {

// The interpolated percentile with the order statistics lo and lo + 1
// selected in v[from, end) (everything before `from` is <= v[from]); the
// lower one's index in *lo_out.
double SelectAndInterpolate(std::vector<double>& v, double percent, size_t from, size_t* lo_out) {
  const double pos = percent / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  const auto at = [&v](size_t i) { return v.begin() + static_cast<std::ptrdiff_t>(i); };
  if (lo >= from) std::nth_element(at(from), at(lo), v.end());
  const double below = v[lo];
  const double above = hi == lo ? below : *std::min_element(at(lo + 1), v.end());
  *lo_out = lo;
  return below + (above - below) * (pos - static_cast<double>(lo));
}

}  // namespace

double LinearInterpolatedPercentile(std::vector<double>* values, double percent) {
  if (values->empty()) return 0;
  size_t lo = 0;
  return SelectAndInterpolate(*values, percent, 0, &lo);
}

std::pair<double, double> LinearInterpolatedPercentiles(std::vector<double>* values, double low,
                                                        double high) {
  std::vector<double>& v = *values;
  // With a NaN the order nth_element leaves is not an ordering, and -0 and 0
  // are equal yet print differently: keep exactly what two separate
  // selections give.
  if (std::any_of(v.begin(), v.end(),
                  [](double x) { return std::isnan(x) || (x == 0 && std::signbit(x)); })) {
    std::vector<double> copy = v;
    const double first = LinearInterpolatedPercentile(&copy, low);
    copy = v;
    return {first, LinearInterpolatedPercentile(&copy, high)};
  }
  if (v.empty()) return {0, 0};
  // Once the lower statistic is in place, everything after it is >= it: the
  // upper one is selected among those (the same values: order statistics do
  // not depend on how they are found).
  size_t low_lo = 0, high_lo = 0;
  const double first = SelectAndInterpolate(v, low, 0, &low_lo);
  const double second = SelectAndInterpolate(v, high, low_lo + 1, &high_lo);
  return {first, second};
}

}  // namespace debugplane::rules_engine
