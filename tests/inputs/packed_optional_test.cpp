// PackedOptional: reads as std::optional does, in the bytes of its number; the value that means
// absent is one no reader stores (NaN, the lowest integer).
#include "inputs/packed_optional.h"

#include <cstdint>
#include <limits>
#include <optional>

#include <gtest/gtest.h>

namespace fragscope::inputs {
namespace {

static_assert(sizeof(PackedOptional<std::int64_t>) == 8 && sizeof(PackedOptional<double>) == 8);
static_assert(sizeof(PackedOptional<int>) == 4);

TEST(PackedOptional, ReadsAsStdOptional) {
  PackedOptional<std::int64_t> n;
  EXPECT_FALSE(n.has_value());
  EXPECT_FALSE(n);
  EXPECT_EQ(n, std::nullopt);
  EXPECT_EQ(n.value_or(7), 7);
  EXPECT_THROW(n.value(), std::bad_optional_access);
  EXPECT_EQ(std::optional<std::int64_t>(n), std::nullopt);
  n = 0;  // zero is a value
  EXPECT_TRUE(n.has_value());
  EXPECT_EQ(n, 0);
  EXPECT_FALSE(n == 1);
  n = -5;
  EXPECT_EQ(*n, -5);
  EXPECT_EQ(n.value(), -5);
  EXPECT_EQ(std::optional<std::int64_t>(n), -5);
  n = std::nullopt;
  EXPECT_FALSE(n.has_value());
  n = 4;
  n.reset();
  EXPECT_FALSE(n.has_value());
  EXPECT_EQ(n, PackedOptional<std::int64_t>());
  EXPECT_FALSE(n == PackedOptional<std::int64_t>(0));
  EXPECT_EQ(PackedOptional<std::int64_t>(3), PackedOptional<std::int64_t>(3));
}

TEST(PackedOptional, AbsentIsAValueNoReaderStores) {
  PackedOptional<double> t = 0.0;
  EXPECT_TRUE(t.has_value());
  t = -std::numeric_limits<double>::infinity();  // JSON numbers past double's range read as infinities
  EXPECT_TRUE(t.has_value());
  t = std::numeric_limits<double>::quiet_NaN();  // JSON has no NaN
  EXPECT_FALSE(t.has_value());
  PackedOptional<int> rank = std::numeric_limits<int>::max();
  EXPECT_TRUE(rank.has_value());
  rank = std::numeric_limits<int>::lowest();  // ranks are not negative
  EXPECT_FALSE(rank.has_value());
  EXPECT_FALSE(PackedOptional<std::int64_t>(std::numeric_limits<std::int64_t>::lowest()).has_value());
}

}  // namespace
}  // namespace fragscope::inputs
