// Two doubles per operation: GCC and Clang vector extensions, which compile to
// SSE2 on x86-64 and NEON on ARM without target-specific code. Used by the
// loops that sum, count or bound a tensor's elements in independent lanes
// (one sequential sum is a chain of dependent additions; lanes pipeline).

#ifndef DEBUGPLANE_BASE_DOUBLE2_H_
#define DEBUGPLANE_BASE_DOUBLE2_H_

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace debugplane::base {

typedef double Double2 __attribute__((vector_size(16)));
typedef int64_t Int2 __attribute__((vector_size(16)));

// The two doubles at `p` (any alignment).
inline Double2 LoadDouble2(const void* p) {
  Double2 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Stores `v` at `p` (any alignment).
inline void StoreDouble2(void* p, Double2 v) { std::memcpy(p, &v, sizeof(v)); }

// Per lane: x < lo ? x : lo, and hi < x ? x : hi (a NaN in x keeps lo or hi).
// SSE2's minpd and maxpd are exactly these; elsewhere a select by the
// comparison.
#if defined(__SSE2__)
inline Double2 LowerDouble2(Double2 x, Double2 lo) { return _mm_min_pd(x, lo); }
inline Double2 HigherDouble2(Double2 x, Double2 hi) { return _mm_max_pd(x, hi); }
#else
inline Double2 SelectDouble2(Int2 mask, Double2 if_true, Double2 if_false) {
  return reinterpret_cast<Double2>((mask & reinterpret_cast<Int2>(if_true)) |
                                   (~mask & reinterpret_cast<Int2>(if_false)));
}
inline Double2 LowerDouble2(Double2 x, Double2 lo) { return SelectDouble2(x < lo, x, lo); }
inline Double2 HigherDouble2(Double2 x, Double2 hi) { return SelectDouble2(hi < x, x, hi); }
#endif

}  // namespace debugplane::base

#endif  // DEBUGPLANE_BASE_DOUBLE2_H_
