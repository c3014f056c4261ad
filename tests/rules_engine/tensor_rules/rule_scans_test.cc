// The shared statistics the rules' faster paths use give exactly what the
// plain ones give: LinearInterpolatedPercentiles against two
// LinearInterpolatedPercentile calls on copies, and the Tensor
// overloads of AllFinite and CountZeros with and without decoder facts.

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "rules_engine/rule/percentile.h"
#include "rules_engine/tensor_rules/rule_internal.h"

namespace debugplane::rules_engine::internal {
namespace {

// Bit-identical (a NaN equals a NaN; -0 differs from 0).
bool Same(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

TEST(RuleScansTest, PercentilesEqualTwoPercentileCalls) {
  std::mt19937 rng(7);
  const double pairs[][2] = {{5, 95}, {0, 100}, {50, 50}, {10, 11}, {95, 95}, {0, 0}};
  for (size_t n = 0; n <= 70; ++n) {
    for (int kind = 0; kind < 5; ++kind) {
      std::vector<double> v(n);
      for (double& x : v) {
        switch (kind) {
          case 0:  // Distinct values.
            x = std::uniform_real_distribution<double>(-1, 1)(rng);
            break;
          case 1:  // Many ties.
            x = static_cast<double>(std::uniform_int_distribution<int>(0, 3)(rng));
            break;
          case 2:  // Zeros of both signs.
            x = std::uniform_int_distribution<int>(0, 1)(rng) ? 0.0 : -0.0;
            break;
          case 3:  // A NaN among values.
            x = std::uniform_real_distribution<double>(-1, 1)(rng);
            break;
          default:  // Infinities.
            x = std::uniform_int_distribution<int>(0, 2)(rng) == 0
                    ? std::numeric_limits<double>::infinity()
                    : std::uniform_real_distribution<double>(-1, 1)(rng);
        }
      }
      if (kind == 3 && n > 0) v[n / 2] = std::numeric_limits<double>::quiet_NaN();
      for (const auto& p : pairs) {
        std::vector<double> scratch = v;
        const auto [low, high] = LinearInterpolatedPercentiles(&scratch, p[0], p[1]);
        std::vector<double> copy = v;
        EXPECT_TRUE(Same(low, LinearInterpolatedPercentile(&copy, p[0])))
            << n << " kind " << kind << " p" << p[0];
        copy = v;
        EXPECT_TRUE(Same(high, LinearInterpolatedPercentile(&copy, p[1])))
            << n << " kind " << kind << " p" << p[1];
      }
    }
  }
}

TEST(RuleScansTest, TensorScansUseFactsWhenSetAndScanOtherwise) {
  Tensor t;
  t.values = {0, 1, std::numeric_limits<double>::infinity(), -0.0};
  EXPECT_FALSE(AllFinite(t));
  EXPECT_EQ(CountZeros(t), 2);
  // Facts, when the decoder set them, are what the rules read.
  t.facts = Tensor::ValueFacts{.all_finite = true, .zeros = 7};
  EXPECT_TRUE(AllFinite(t));
  EXPECT_EQ(CountZeros(t), 7);
}

}  // namespace
}  // namespace debugplane::rules_engine::internal
