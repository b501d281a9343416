#include "alloc/caching_allocator.h"

#include <optional>
#include <string>

#include <gtest/gtest.h>

// CachingAllocator::restore (caching_allocator_restore.cpp): a mid-run state adopted, then driven
// by the allocator's own rules.
namespace fragscope::alloc {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

/// A model under `conf` on its own simulated device of `capacity` bytes.
struct Harness {
  explicit Harness(const std::string& conf, std::optional<std::uint64_t> capacity)
      : device(capacity), model(options(conf), device) {}
  static CachingAllocatorOptions options(const std::string& conf) {
    CachingAllocatorOptions o;
    o.config = parse_alloc_conf(conf);
    return o;
  }
  const AllocatorStats& stats() const { return model.stats(); }

  DeviceMemory device;
  CachingAllocator model;
};

TEST(CachingAllocatorRestore, RebuildsAMidRunState) {
  DeviceMemory device;
  CachingAllocatorOptions options;
  CachingAllocator model(options, device);
  InitialSegment segment;
  segment.address = 0x7f0000000000;
  segment.size = 20 * kMiB;
  segment.live_blocks = {{0x7f0000000000 + 5 * kMiB, 5 * kMiB, 5 * kMiB - 100, false}};
  const auto live = model.restore({segment});
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(model.stats().reserved_bytes, 20 * kMiB);
  EXPECT_EQ(model.stats().allocated_bytes, 5 * kMiB);
  // The free gaps around the live block serve requests without a cudaMalloc.
  EXPECT_EQ(model.address(model.malloc(10 * kMiB - 512, 0)), 0x7f0000000000 + 10 * kMiB);
  EXPECT_EQ(model.address(model.malloc(5 * kMiB, 0)), 0x7f0000000000);
  model.free(live[0]);
  EXPECT_EQ(model.stats().reserved_bytes, 20 * kMiB);
  EXPECT_EQ(model.stats().segments, 1u);
}

TEST(CachingAllocatorRestore, WhatIfFromAnotherConfigsStateNeverFreesPartOfASegment) {
  // Recorded under the defaults: a 1 GiB segment whose first 256 MiB stay live, the 768 MiB
  // behind them free. Under max_split_size that free block is "oversize", but it is a piece of
  // a segment: release_available must pass over it (cudaFree takes whole segments), and the
  // request ends in an OOM, not in freeing memory that is still in use.
  Harness h("max_split_size_mb:128", 1124 * kMiB);
  InitialSegment segment;
  segment.address = 0x7f0000000000;
  segment.size = 1024 * kMiB;
  segment.live_blocks = {{0x7f0000000000, 256 * kMiB, 256 * kMiB, false}};
  ASSERT_EQ(h.model.restore({segment}).size(), 1u);
  EXPECT_EQ(h.model.malloc(300 * kMiB, 0), kNoBlock);
  EXPECT_EQ(h.stats().num_ooms, 1u);
  EXPECT_EQ(h.stats().reserved_bytes, 1024 * kMiB);
  EXPECT_EQ(h.stats().segments, 1u);
}

// Recorded without expandable segments: two 40 MiB segments, each pinned by live blocks (55 MiB
// free between them, no segment releasable). Under expandable segments the same blocks are
// re-laid back to back, each of its rounded request, in the 80 MiB the segments held; emptying
// the cache then gives back every page no live block touches, and a 30 MiB request fits in
// 62 MiB, less than the recorded segments alone held.
TEST(CachingAllocatorRestore, UnderExpandableSegmentsReLaysCudaMallocSegments) {
  Harness h("expandable_segments:True", 62 * kMiB);
  InitialSegment first, second, small;
  first.address = 0x7f0000000000;
  first.size = 40 * kMiB;
  first.live_blocks = {{first.address + 10 * kMiB, 5 * kMiB + 512 * 1024, 5 * kMiB, false}};
  second.address = 0x7f0010000000;
  second.size = 40 * kMiB;
  second.live_blocks = {{second.address, 10 * kMiB, 10 * kMiB - 100, false},
                        {second.address + 30 * kMiB, 10 * kMiB, 10 * kMiB, true}};
  small.address = 0x7f0020000000;
  small.size = 2 * kMiB;
  small.small_pool = true;
  small.live_blocks = {{small.address + 4096, 512, 512, false}};
  const auto live = h.model.restore({second, small, first});
  ASSERT_EQ(live.size(), 4u);  // in input order
  // The large pool's blocks back to back in address order, the first one's remainder split off.
  const std::uint64_t base = h.model.address(live[3]);
  EXPECT_EQ(h.model.address(live[0]), base + 5 * kMiB);
  EXPECT_EQ(h.model.address(live[1]), base + 15 * kMiB);
  EXPECT_EQ(h.stats().reserved_bytes, 82 * kMiB);  // 80 MiB of 20 MiB pages, one 2 MiB page
  EXPECT_EQ(h.stats().segments, 0u);
  EXPECT_EQ(h.stats().allocated_bytes, 15 * kMiB + 512);  // the pending free is not allocated
  // The release completes the pending free too: one page of the large pool stays.
  h.model.empty_cache();
  EXPECT_EQ(h.stats().reserved_bytes, 22 * kMiB);
  const BlockHandle next = h.model.malloc(30 * kMiB, 0);
  ASSERT_NE(next, kNoBlock);
  EXPECT_EQ(h.model.address(next), base + 15 * kMiB);
  EXPECT_EQ(h.stats().reserved_bytes, 62 * kMiB);
}

}  // namespace
}  // namespace fragscope::alloc
