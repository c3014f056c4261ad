// How rules write numbers into StatusDetails.

#include <cmath>
#include <limits>

#include "gtest/gtest.h"
#include "rules_engine/tensor_rules/rule_internal.h"

namespace debugplane::rules_engine {
namespace {

using internal::Num;

// 0/0 on x86 is a NaN with its sign bit set, which printf's %g wrote as
// "-nan" in every rule's details ("element 3 is -nan").
TEST(NumTest, NaNIsNanWhateverItsSignBitInfinitiesKeepTheirSign) {
  volatile double zero = 0.0;
  const double computed_nan = zero / zero;
  EXPECT_EQ(Num(computed_nan), "nan");
  EXPECT_EQ(Num(-std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(Num(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(Num(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(Num(0.5), "0.5");
  EXPECT_EQ(Num(1e-40), "1e-40");
}

}  // namespace
}  // namespace debugplane::rules_engine
