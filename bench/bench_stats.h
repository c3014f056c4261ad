// Latency statistics for the benchmarks.

#ifndef DEBUGPLANE_BENCH_BENCH_STATS_H_
#define DEBUGPLANE_BENCH_BENCH_STATS_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace debugplane::bench {

struct Percentiles {
  size_t n = 0;
  double p50 = 0, p90 = 0, p99 = 0, max = 0;
};

inline Percentiles Summarize(std::vector<double> values) {
  Percentiles p;
  p.n = values.size();
  if (values.empty()) return p;
  std::sort(values.begin(), values.end());
  // Nearest rank.
  auto rank = [&](double q) {
    const size_t r = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
    return values[std::min(values.size() - 1, r == 0 ? 0 : r - 1)];
  };
  p.p50 = rank(0.50);
  p.p90 = rank(0.90);
  p.p99 = rank(0.99);
  p.max = values.back();
  return p;
}

}  // namespace debugplane::bench

#endif  // DEBUGPLANE_BENCH_BENCH_STATS_H_
