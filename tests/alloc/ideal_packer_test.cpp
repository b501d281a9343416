#include "alloc/ideal_packer.h"

#include <gtest/gtest.h>

namespace fragscope::alloc {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

TEST(IdealPackerTest, PeakIsThePeakOfLiveRoundedBytes) {
  DeviceMemory device;
  IdealPacker packer(AllocConfig{}, device);
  const BlockHandle a = packer.malloc(1000, 0);  // 1024 after rounding
  const BlockHandle b = packer.malloc(5 * kMiB, 1);
  packer.free(a);
  packer.malloc(3 * kMiB, 0);
  EXPECT_EQ(packer.stats().peak_reserved_bytes, 8 * kMiB);
  EXPECT_EQ(packer.stats().reserved_bytes, 8 * kMiB);
  packer.free(b);
  EXPECT_EQ(packer.stats().reserved_bytes, 3 * kMiB);
  EXPECT_EQ(packer.stats().peak_reserved_bytes, 8 * kMiB);
  EXPECT_EQ(packer.stats().num_alloc_retries, 0u);
}

TEST(IdealPackerTest, FailsOnlyBeyondTheCapacity) {
  DeviceMemory device(10 * kMiB);
  IdealPacker packer(AllocConfig{}, device);
  ASSERT_NE(packer.malloc(6 * kMiB, 0), kNoBlock);
  ASSERT_NE(packer.malloc(4 * kMiB, 0), kNoBlock);  // exactly full: no fragmentation here
  EXPECT_EQ(packer.malloc(512, 0), kNoBlock);
  EXPECT_EQ(packer.stats().num_ooms, 1u);
}

TEST(IdealPackerTest, ABlockPendingFreeAtTheStartIsFreedAlready) {
  // A ring that starts between a block's free_requested and its free_completed: the program
  // freed it, and the ideal packer counts a block free from free_requested on.
  DeviceMemory device(10 * kMiB);
  IdealPacker packer(AllocConfig{}, device);
  InitialSegment segment;
  segment.size = 8 * kMiB;
  segment.live_blocks = {{.address = 0, .size = 4 * kMiB, .requested_size = 4 * kMiB, .pending_free = false},
                         {.address = 4 * kMiB, .size = 4 * kMiB, .requested_size = 4 * kMiB, .pending_free = true}};
  const std::vector<BlockHandle> live = packer.restore({segment});
  ASSERT_EQ(live.size(), 2u);
  EXPECT_NE(live[0], kNoBlock);
  EXPECT_EQ(live[1], kNoBlock);
  EXPECT_EQ(packer.stats().reserved_bytes, 4 * kMiB);
  EXPECT_NE(packer.malloc(6 * kMiB, 0), kNoBlock);  // 4 + 6 of 10: the pending block holds nothing
}

TEST(IdealPackerTest, APrivatePoolHoldsTheMostItHadLive) {
  // A CUDA graph's pool: PyTorch keeps its memory while the graph lives, however well it is packed.
  constexpr MemPoolId kGraphPool = 1;
  DeviceMemory device(10 * kMiB);
  IdealPacker packer(AllocConfig{}, device);
  const BlockHandle a = packer.malloc(4 * kMiB, 0, kGraphPool);
  const BlockHandle b = packer.malloc(2 * kMiB, 0, kGraphPool);
  packer.free(a);
  packer.free(b);
  EXPECT_EQ(packer.stats().allocated_bytes, 0u);
  EXPECT_EQ(packer.stats().reserved_bytes, 6 * kMiB);  // its peak, idle
  EXPECT_EQ(packer.malloc(5 * kMiB, 0), kNoBlock);      // 6 held + 5 > 10: the default pool cannot have them
  const BlockHandle c = packer.malloc(4 * kMiB, 0);
  ASSERT_NE(c, kNoBlock);
  ASSERT_NE(packer.malloc(5 * kMiB, 0, kGraphPool), kNoBlock);  // within what the pool holds: nothing more
  EXPECT_EQ(packer.stats().reserved_bytes, 10 * kMiB);
  EXPECT_EQ(packer.stats().allocated_bytes, 9 * kMiB);
  packer.free(c);
  EXPECT_EQ(packer.stats().reserved_bytes, 6 * kMiB);  // the default pool's bytes go back
  EXPECT_EQ(packer.stats().peak_reserved_bytes, 10 * kMiB);
  EXPECT_EQ(packer.stats().num_ooms, 1u);
}

TEST(IdealPackerTest, APrivatePoolAtTheStartHoldsWhatItHasLive) {
  constexpr MemPoolId kGraphPool = 2;
  DeviceMemory device(10 * kMiB);
  IdealPacker packer(AllocConfig{}, device);
  InitialSegment segment;
  segment.size = 8 * kMiB;  // the segment's free rest is not held: its earlier peak is unknown
  segment.mem_pool = kGraphPool;
  segment.live_blocks = {{.address = 0, .size = 3 * kMiB, .requested_size = 3 * kMiB, .pending_free = false}};
  const std::vector<BlockHandle> live = packer.restore({segment});
  ASSERT_EQ(live.size(), 1u);
  packer.free(live[0]);
  EXPECT_EQ(packer.stats().reserved_bytes, 3 * kMiB);
  EXPECT_EQ(packer.malloc(8 * kMiB, 0), kNoBlock);
  EXPECT_NE(packer.malloc(7 * kMiB, 0), kNoBlock);
}

}  // namespace
}  // namespace fragscope::alloc
