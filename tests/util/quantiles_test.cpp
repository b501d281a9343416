// quantile: numpy's default (linear between closest ranks), worked out by hand here;
// relative_spread: (p90 − p10) / median.
#include "util/quantiles.h"

#include <gtest/gtest.h>

namespace fragscope {
namespace {

TEST(Quantile, InterpolatesBetweenClosestRanksLikeNumpy) {
  const std::vector<double> v = {4, 1, 3, 2};  // unsorted on purpose: sorted 1 2 3 4, ranks 0..3
  EXPECT_DOUBLE_EQ(*quantile(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(*quantile(v, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(*quantile(v, 0.5), 2.5);   // rank 1.5
  EXPECT_DOUBLE_EQ(*quantile(v, 0.1), 1.3);   // rank 0.3
  EXPECT_DOUBLE_EQ(*quantile(v, 0.9), 3.7);   // rank 2.7
  EXPECT_DOUBLE_EQ(*quantile({10, 20, 30, 40, 50}, 0.25), 20.0);  // rank 1 exactly
  EXPECT_DOUBLE_EQ(*quantile({10, 20, 30, 40, 50}, 0.3), 22.0);   // rank 1.2
}

TEST(Quantile, EdgeCases) {
  EXPECT_FALSE(quantile({}, 0.5).has_value());
  EXPECT_DOUBLE_EQ(*quantile({7}, 0.9), 7.0);
  EXPECT_DOUBLE_EQ(*quantile({1, 2}, -1.0), 1.0);  // clamped to [0, 1]
  EXPECT_DOUBLE_EQ(*quantile({1, 2}, 2.0), 2.0);
  EXPECT_DOUBLE_EQ(*quantile({5, 5, 5}, 0.37), 5.0);
}

TEST(RelativeSpread, IsTheP10ToP90RangeOverTheMedian) {
  EXPECT_DOUBLE_EQ(*relative_spread({4, 1, 3, 2}), (3.7 - 1.3) / 2.5);
  EXPECT_DOUBLE_EQ(*relative_spread({100, 100, 100}), 0.0);  // a steady series does not wander
  EXPECT_FALSE(relative_spread({}).has_value());
  EXPECT_FALSE(relative_spread({0, 0, 0}).has_value());   // no level to compare with
  EXPECT_FALSE(relative_spread({-3, -2, -1}).has_value());
}

}  // namespace
}  // namespace fragscope
