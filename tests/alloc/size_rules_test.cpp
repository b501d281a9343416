#include "alloc/size_rules.h"

#include <gtest/gtest.h>

namespace fragscope::alloc {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

TEST(SizeRulesTest, RoundsTo512Bytes) {
  const AllocConfig c;
  EXPECT_EQ(round_size(0, c), 512u);
  EXPECT_EQ(round_size(1, c), 512u);
  EXPECT_EQ(round_size(512, c), 512u);
  EXPECT_EQ(round_size(513, c), 1024u);
  EXPECT_EQ(round_size(51712, c), 51712u);          // a request seen in frag_oom_104
  EXPECT_EQ(round_size(1654784000, c), 1654784000u);  // the frag_oom_104 OOM request
}

TEST(SizeRulesTest, PowerOfTwoDivisions) {
  // The reference's example: 1200 with 4 divisions of [1024, 2048) → 1280.
  EXPECT_EQ(roundup_power2_next_division(1200, 4), 1280u);
  EXPECT_EQ(roundup_power2_next_division(1024, 4), 1024u);  // powers of two stay
  EXPECT_EQ(roundup_power2_next_division(1280, 4), 1280u);  // on a division: stays
  EXPECT_EQ(roundup_power2_next_division(5 * kMiB, 4), 5 * kMiB);
  EXPECT_EQ(roundup_power2_next_division(5 * kMiB + 1, 4), 6 * kMiB);
  AllocConfig c = parse_alloc_conf("roundup_power2_divisions:4");
  // Only sizes above 512 × divisions are rounded this way.
  EXPECT_EQ(round_size(1200, c), 1536u);
  EXPECT_EQ(round_size(2000, c), 2048u);
  EXPECT_EQ(round_size(3 * kMiB + 1, c), 3 * kMiB + 512 * 1024);  // step 512 KiB in [2, 4) MiB
  // Per-interval settings: interval k = [2^k MiB, 2^(k+1) MiB).
  c = parse_alloc_conf("roundup_power2_divisions:[1:0,256:2]");
  EXPECT_EQ(round_size(300 * kMiB, c), 384 * kMiB);
  EXPECT_EQ(round_size(100 * kMiB + 1, c), 100 * kMiB + 512);
}

TEST(SizeRulesTest, PoolsAndSegmentSizes) {
  const AllocConfig c;
  EXPECT_EQ(pool_of(kMiB), PoolKind::kSmall);
  EXPECT_EQ(pool_of(kMiB + 512), PoolKind::kLarge);
  EXPECT_EQ(allocation_size(512, c), 2 * kMiB);
  EXPECT_EQ(allocation_size(kMiB, c), 2 * kMiB);
  EXPECT_EQ(allocation_size(kMiB + 512, c), 20 * kMiB);
  EXPECT_EQ(allocation_size(10 * kMiB - 512, c), 20 * kMiB);
  EXPECT_EQ(allocation_size(10 * kMiB, c), 10 * kMiB);
  EXPECT_EQ(allocation_size(52953088, c), 54525952u);  // capacity_oom: 50.5 MiB → 52 MiB
  const AllocConfig big = parse_alloc_conf("large_segment_size_mb:64");
  EXPECT_EQ(allocation_size(3 * kMiB, big), 64 * kMiB);
}

}  // namespace
}  // namespace fragscope::alloc
