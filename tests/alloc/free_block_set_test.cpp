#include "alloc/free_block_set.h"

#include <random>
#include <set>
#include <tuple>

#include <gtest/gtest.h>

namespace fragscope::alloc {
namespace {

using Reference = std::set<std::tuple<std::uint64_t, std::uint64_t, BlockHandle>>;

void expect_same(const FreeBlockSet& set, const Reference& ref) {
  ASSERT_EQ(set.size(), ref.size());
  auto it = set.begin();
  for (const auto& [size, address, block] : ref) {
    ASSERT_NE(it, set.end());
    EXPECT_EQ(it->size, size);
    EXPECT_EQ(it->address(), address);
    EXPECT_EQ(it->block(), block);
    ++it;
  }
  EXPECT_EQ(it, set.end());
}

TEST(FreeBlockSetTest, MatchesStdSetOrderUnderRandomUse) {
  // std::set of (size, address) is what PyTorch uses; the set must order and search the same.
  std::mt19937_64 rng(42);
  FreeBlockSet set;
  Reference ref;
  const std::uint64_t sizes[] = {512, 1024, 2 << 20, 20 << 20, 44040192, 44040192 + 512,
                                 1ull << 30, (1ull << 30) + (2 << 20), 3ull << 32};
  for (int step = 0; step < 20000; ++step) {
    if (ref.empty() || rng() % 3 != 0) {
      const std::uint64_t size = sizes[rng() % std::size(sizes)] + 512 * (rng() % 4);
      const std::uint64_t address = (rng() % (1ull << 30)) << 9;
      const auto block = static_cast<BlockHandle>(step);
      if (ref.insert({size, address, block}).second) set.insert(size, address, block);
    } else {
      auto victim = ref.begin();
      std::advance(victim, static_cast<long>(rng() % ref.size()));
      set.erase(std::get<0>(*victim), std::get<1>(*victim));
      ref.erase(victim);
    }
    if (step % 997 == 0) expect_same(set, ref);
    // Queries between stored sizes find none, part or all of a class: each is a separate path.
    const std::uint64_t want = sizes[rng() % std::size(sizes)] + 512 * (rng() % 5);
    auto expected = ref.lower_bound({want, 0, 0});
    auto got = set.lower_bound(want);
    if (expected == ref.end()) {
      EXPECT_EQ(got, set.end());
    } else {
      ASSERT_NE(got, set.end());
      EXPECT_EQ(got->size, std::get<0>(*expected));
      EXPECT_EQ(got->address(), std::get<1>(*expected));
    }
  }
  expect_same(set, ref);
}

TEST(FreeBlockSetTest, BestFitPrefersTheLowestAddressAmongEqualSizes) {
  FreeBlockSet set;
  set.insert(4096, 0x3000, 1);
  set.insert(4096, 0x1000, 2);
  set.insert(8192, 0x0000, 3);
  auto it = set.lower_bound(4000);
  EXPECT_EQ(it->block(), 2u);
  set.erase(it);
  EXPECT_EQ(set.lower_bound(4000)->block(), 1u);  // then the next address of that size
  EXPECT_EQ(set.lower_bound(4097)->block(), 3u);
  EXPECT_EQ(set.lower_bound(8193), set.end());
}

TEST(FreeBlockSetTest, WalksBackwardsFromTheEnd) {
  FreeBlockSet set;
  set.insert(1 << 20, 0x1000, 1);
  set.insert(64 << 20, 0x2000, 2);
  set.insert(64 << 20, 0x3000, 3);
  auto it = set.end();
  --it;
  EXPECT_EQ(it->block(), 3u);
  --it;
  EXPECT_EQ(it->block(), 2u);
  --it;
  EXPECT_EQ(it->block(), 1u);
  EXPECT_EQ(it, set.begin());
}

}  // namespace
}  // namespace fragscope::alloc
