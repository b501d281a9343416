#include "alloc/caching_allocator.h"

#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace fragscope::alloc {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

/// A model on its own simulated device, with its segment events logged.
struct Harness {
  explicit Harness(const std::string& conf, std::optional<std::uint64_t> capacity = std::nullopt,
                   std::optional<std::uint64_t> allowed = std::nullopt)
      : device(capacity), model(options(conf, allowed), device) {
    model.set_segment_log(&log);
  }
  static CachingAllocatorOptions options(const std::string& conf,
                                         std::optional<std::uint64_t> allowed) {
    CachingAllocatorOptions o;
    o.config = parse_alloc_conf(conf);
    o.allowed_memory_maximum = allowed;
    return o;
  }
  const AllocatorStats& stats() const { return model.stats(); }
  std::vector<SegmentEvent> take_log() {
    std::vector<SegmentEvent> out;
    out.swap(log);
    return out;
  }

  DeviceMemory device;
  CachingAllocator model;
  std::vector<SegmentEvent> log;
};

TEST(CachingAllocatorTest, SmallRequestsArePackedInto2MiBSegments) {
  Harness h("");
  const BlockHandle a = h.model.malloc(1000, 0);
  const BlockHandle b = h.model.malloc(1000, 0);
  EXPECT_EQ(h.model.address(b), h.model.address(a) + 1024);  // split off the same segment
  EXPECT_EQ(h.stats().reserved_bytes, 2 * kMiB);
  EXPECT_EQ(h.stats().segments, 1u);
  EXPECT_EQ(h.stats().allocated_bytes, 2048u);
  EXPECT_EQ(h.stats().requested_bytes, 2000u);
}

TEST(CachingAllocatorTest, MidSizedRequestsShareA20MiBSegment) {
  Harness h("");
  const BlockHandle a = h.model.malloc(5 * kMiB, 0);
  const BlockHandle b = h.model.malloc(5 * kMiB, 0);
  EXPECT_EQ(h.model.address(b), h.model.address(a) + 5 * kMiB);
  EXPECT_EQ(h.stats().reserved_bytes, 20 * kMiB);
  ASSERT_EQ(h.log.size(), 1u);
  EXPECT_EQ(h.log[0].action, SegmentAction::kAlloc);
  EXPECT_EQ(h.log[0].size, 20 * kMiB);
}

TEST(CachingAllocatorTest, LargeBlockKeepsAnUnsplittableRemainder) {
  Harness h("");
  // 11 MiB + 1 → 12 MiB segment; the 1 MiB - 512 rest is not worth a split (≤ 1 MiB).
  h.model.malloc(11 * kMiB + 1, 0);
  EXPECT_EQ(h.stats().reserved_bytes, 12 * kMiB);
  EXPECT_EQ(h.stats().allocated_bytes, 12 * kMiB);
  // 9 MiB from a 20 MiB segment: 11 MiB left is split off and stays cached.
  Harness g("");
  g.model.malloc(9 * kMiB, 0);
  EXPECT_EQ(g.stats().allocated_bytes, 9 * kMiB);
  g.model.malloc(11 * kMiB, 0);
  EXPECT_EQ(g.stats().reserved_bytes, 20 * kMiB);  // served by the cached remainder
}

TEST(CachingAllocatorTest, CachedBlocksServeOnlyTheirOwnStream) {
  Harness h("");
  h.model.free(h.model.malloc(30 * kMiB, 0));
  h.model.malloc(30 * kMiB, 1);
  EXPECT_EQ(h.stats().reserved_bytes, 60 * kMiB);
  h.model.malloc(30 * kMiB, 0);
  EXPECT_EQ(h.stats().reserved_bytes, 60 * kMiB);
}

TEST(CachingAllocatorTest, BestFitTakesTheSmallestThenTheLowestAddress) {
  Harness h("");
  const BlockHandle big = h.model.malloc(40 * kMiB, 0);
  const BlockHandle fit = h.model.malloc(30 * kMiB, 0);
  const BlockHandle twin = h.model.malloc(30 * kMiB, 0);
  const std::uint64_t fit_address = h.model.address(fit);
  const std::uint64_t twin_address = h.model.address(twin);
  h.model.free(big);
  h.model.free(fit);
  h.model.free(twin);
  const BlockHandle got = h.model.malloc(25 * kMiB, 0);
  EXPECT_EQ(h.model.address(got), std::min(fit_address, twin_address));
  EXPECT_EQ(h.stats().reserved_bytes, 100 * kMiB);
}

TEST(CachingAllocatorTest, FreeMergesWithFreeNeighbours) {
  Harness h("");
  const BlockHandle a = h.model.malloc(5 * kMiB, 0);
  const BlockHandle b = h.model.malloc(5 * kMiB, 0);
  const BlockHandle c = h.model.malloc(5 * kMiB, 0);
  const std::uint64_t base = h.model.address(a);
  h.model.free(b);
  h.model.free(a);  // a + b merge into one 10 MiB block
  const BlockHandle d = h.model.malloc(10 * kMiB, 0);
  EXPECT_EQ(h.model.address(d), base);
  EXPECT_EQ(h.stats().reserved_bytes, 20 * kMiB);
  h.model.free(c);
  h.model.free(d);
  h.model.empty_cache();  // the whole segment is one free block again: released
  EXPECT_EQ(h.stats().reserved_bytes, 0u);
  EXPECT_EQ(h.stats().segments, 0u);
}

TEST(CachingAllocatorTest, EmptyCacheReleasesEveryFullyFreeSegmentOfEveryPool) {
  // torch.cuda.empty_cache(): synchronise pending frees, then cudaFree every unsplit free
  // segment, large pools then small, of every stream; a segment with a live block stays.
  Harness h("");
  const BlockHandle large0 = h.model.malloc(30 * kMiB, 0);
  const BlockHandle small0 = h.model.malloc(1000, 0);
  const BlockHandle large1 = h.model.malloc(12 * kMiB, 1);
  const BlockHandle mid1 = h.model.malloc(4 * kMiB, 1);  // a 20 MiB segment, split
  const BlockHandle pending = h.model.malloc(2000, 1);
  h.model.malloc(4 * kMiB, 1);  // keeps mid1's segment in use
  h.model.free(large0);
  h.model.free(small0);
  h.model.free(large1);
  h.model.free(mid1);
  h.model.free_requested(pending);  // used on another stream: waits for its events
  EXPECT_EQ(h.stats().reserved_bytes, 30 * kMiB + 2 * kMiB + 12 * kMiB + 20 * kMiB + 2 * kMiB);
  h.take_log();
  h.model.empty_cache();
  EXPECT_EQ(h.stats().reserved_bytes, 20 * kMiB);
  EXPECT_EQ(h.stats().segments, 1u);
  EXPECT_EQ(h.stats().num_sync_all_streams, 1u);
  const auto log = h.take_log();
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[0].size, 30 * kMiB);  // large pools first (stream order), then the small ones
  EXPECT_EQ(log[1].size, 12 * kMiB);
  EXPECT_EQ(log[2].size, 2 * kMiB);
  EXPECT_EQ(log[3].size, 2 * kMiB);
  for (const SegmentEvent& e : log) EXPECT_EQ(e.action, SegmentAction::kFree);
  h.model.free_completed(pending);  // already freed by the flush's synchronisation: no effect
  EXPECT_EQ(h.stats().reserved_bytes, 20 * kMiB);
}

TEST(CachingAllocatorTest, PrivatePoolsKeepTheirBlocksAndOutliveEveryRelease) {
  // A CUDA graph's pool (torch.compile reduce-overhead): its segments serve only its mallocs,
  // and neither empty_cache() nor a failed cudaMalloc's release gives them back.
  constexpr MemPoolId kGraphPool = 1;
  Harness h("", 60 * kMiB);
  const BlockHandle graph = h.model.malloc(5 * kMiB, 0, kGraphPool);
  const std::uint64_t graph_address = h.model.address(graph);
  EXPECT_EQ(h.stats().reserved_bytes, 20 * kMiB);
  h.model.free(graph);
  const BlockHandle plain = h.model.malloc(5 * kMiB, 0);  // the graph's free 20 MiB do not serve it
  EXPECT_NE(h.model.address(plain), graph_address);
  EXPECT_EQ(h.stats().reserved_bytes, 40 * kMiB);
  h.model.free(plain);
  h.model.empty_cache();
  EXPECT_EQ(h.stats().reserved_bytes, 20 * kMiB);  // the default pool's segment only
  // 50 MiB do not fit beside the graph's 20: the release frees nothing of it, and the malloc fails.
  h.take_log();
  EXPECT_EQ(h.model.malloc(50 * kMiB, 0), kNoBlock);
  EXPECT_EQ(h.stats().reserved_bytes, 20 * kMiB);
  EXPECT_TRUE(h.take_log().empty());
  // The graph's cached block serves the graph's next malloc.
  const BlockHandle again = h.model.malloc(5 * kMiB, 0, kGraphPool);
  EXPECT_EQ(h.model.address(again), graph_address);
  EXPECT_EQ(h.stats().reserved_bytes, 20 * kMiB);
}

TEST(CachingAllocatorTest, MaxSplitSizeKeepsOversizeBlocksWhole) {
  Harness h("max_split_size_mb:64");
  const BlockHandle big = h.model.malloc(100 * kMiB, 0);
  h.model.free(big);
  // A request below max_split_size never takes an oversize block.
  h.model.malloc(50 * kMiB, 0);
  EXPECT_EQ(h.stats().reserved_bytes, 150 * kMiB);
  // A request above it takes an oversize block within max_non_split_rounding (20 MiB), whole.
  const BlockHandle near = h.model.malloc(90 * kMiB, 0);
  EXPECT_EQ(h.stats().reserved_bytes, 150 * kMiB);
  EXPECT_EQ(h.stats().allocated_bytes, 50 * kMiB + 100 * kMiB);
  h.model.free(near);
  // ... but not one 20 MiB or more larger than the request.
  h.model.malloc(80 * kMiB, 0);
  EXPECT_EQ(h.stats().reserved_bytes, 230 * kMiB);
}

TEST(CachingAllocatorTest, PendingFreesWaitForTheirEvents) {
  Harness h("");
  const BlockHandle a = h.model.malloc(5 * kMiB, 0);
  const std::uint64_t a_address = h.model.address(a);
  h.model.free_requested(a);
  EXPECT_EQ(h.stats().allocated_bytes, 0u);  // allocated drops at once
  const BlockHandle b = h.model.malloc(5 * kMiB, 0);
  EXPECT_NE(h.model.address(b), a_address);  // the block is not reusable yet
  h.model.free_completed(a);
  const BlockHandle c = h.model.malloc(5 * kMiB, 0);
  EXPECT_EQ(h.model.address(c), a_address);
}

TEST(CachingAllocatorTest, FailedCudaMallocFreesTheCacheAndRetries) {
  Harness h("", 50 * kMiB);
  h.model.free(h.model.malloc(20 * kMiB, 0));
  h.take_log();
  const BlockHandle big = h.model.malloc(40 * kMiB, 0);
  ASSERT_NE(big, kNoBlock);
  EXPECT_EQ(h.stats().num_alloc_retries, 1u);
  EXPECT_EQ(h.stats().reserved_bytes, 40 * kMiB);
  const auto log = h.take_log();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].action, SegmentAction::kFree);
  EXPECT_EQ(log[0].size, 20 * kMiB);
  EXPECT_EQ(log[1].action, SegmentAction::kAlloc);
  EXPECT_EQ(log[1].size, 40 * kMiB);
}

TEST(CachingAllocatorTest, OutOfMemoryAfterTheRetry) {
  Harness h("", 50 * kMiB);
  h.model.malloc(30 * kMiB, 0);
  EXPECT_EQ(h.model.malloc(30 * kMiB, 0), kNoBlock);
  EXPECT_EQ(h.stats().num_ooms, 1u);
  EXPECT_EQ(h.stats().num_alloc_retries, 1u);  // the failed malloc still counts its retry
  EXPECT_EQ(h.stats().reserved_bytes, 30 * kMiB);
}

TEST(CachingAllocatorTest, SplitSegmentsWithLiveBlocksAreNeverReleased) {
  // The fragmentation PyTorch issue #35901 describes: free space pinned by a live block.
  Harness h("", 40 * kMiB);
  const BlockHandle a = h.model.malloc(5 * kMiB, 0);
  h.model.malloc(5 * kMiB, 0);  // keeps the 20 MiB segment split
  h.model.free(a);
  EXPECT_EQ(h.model.malloc(25 * kMiB, 0), kNoBlock);  // 20 reserved + 26 > 40: nothing to free
  EXPECT_EQ(h.stats().reserved_bytes, 20 * kMiB);
}

TEST(CachingAllocatorTest, ReleaseAvailableFreesAnOversizeBlockWithoutARetry) {
  Harness h("max_split_size_mb:64", 400 * kMiB);
  h.model.free(h.model.malloc(300 * kMiB, 0));
  h.take_log();
  // 300 MiB cached is oversize and ≥ 150 + 20 MiB: not reusable; cudaMalloc fails (450 > 400);
  // release_available frees that block and the second cudaMalloc succeeds: no retry counted.
  ASSERT_NE(h.model.malloc(150 * kMiB, 0), kNoBlock);
  EXPECT_EQ(h.stats().num_alloc_retries, 0u);
  EXPECT_EQ(h.stats().reserved_bytes, 150 * kMiB);
  const auto log = h.take_log();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0], (SegmentEvent{SegmentAction::kFree, log[0].address, 300 * kMiB}));
  EXPECT_EQ(log[1].action, SegmentAction::kAlloc);
}

TEST(CachingAllocatorTest, GarbageCollectionNeedsAFractionAndFreesOldBlocks) {
  Harness h("garbage_collection_threshold:0.5", std::nullopt, 100 * kMiB);
  const BlockHandle a = h.model.malloc(30 * kMiB, 0);
  const BlockHandle b = h.model.malloc(30 * kMiB, 0);
  h.model.free(a);
  h.model.free(b);
  h.take_log();
  // 60 MiB reserved > 50 MiB threshold: before asking for memory, GC frees the cached blocks
  // at least as old as the average (both, here).
  h.model.malloc(40 * kMiB, 0);
  const auto log = h.take_log();
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0].action, SegmentAction::kFree);
  EXPECT_EQ(log[1].action, SegmentAction::kFree);
  EXPECT_EQ(log[2].action, SegmentAction::kAlloc);
  EXPECT_EQ(h.stats().num_alloc_retries, 0u);
  // The fraction caps reserved memory without asking the driver.
  EXPECT_EQ(h.model.malloc(70 * kMiB, 0), kNoBlock);
}

TEST(CachingAllocatorTest, WithoutAFractionGarbageCollectionIsOff) {
  Harness h("garbage_collection_threshold:0.5");
  h.model.free(h.model.malloc(30 * kMiB, 0));
  h.model.free(h.model.malloc(30 * kMiB, 0));  // reuses the cached block
  h.take_log();
  h.model.malloc(40 * kMiB, 0);
  const auto log = h.take_log();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].action, SegmentAction::kAlloc);
}

// A hostile plan (micro_batch_size = 1000000) asked the unlimited first replay for 62.50 TiB at once: the walk over
// the new segment's blocks ran past its end (SIGSEGV). A request larger than a segment's whole range fits in none.
TEST(CachingAllocatorTest, AnExpandableRequestLargerThanTheSegmentsRangeIsRefused) {
  Harness h("expandable_segments:True");
  EXPECT_EQ(h.model.malloc(64ull << 40, 0), kNoBlock);  // 64 TiB: the default device is 1 TiB
  EXPECT_EQ(h.stats().reserved_bytes, 0u);
  EXPECT_NE(h.model.malloc(5 * kMiB, 0), kNoBlock);  // and the model goes on as before
}

TEST(CachingAllocatorTest, ExpandableSegmentsMapPagesOnDemand) {
  Harness h("expandable_segments:True");
  const BlockHandle a = h.model.malloc(5 * kMiB, 0);
  EXPECT_EQ(h.stats().reserved_bytes, 20 * kMiB);  // one 20 MiB page
  EXPECT_EQ(h.stats().segments, 0u);                // maps are not cudaMalloc segments
  const BlockHandle b = h.model.malloc(30 * kMiB, 0);
  // The 15 MiB free tail plus one more page: the segment grows in place.
  EXPECT_EQ(h.model.address(b), h.model.address(a) + 5 * kMiB);
  EXPECT_EQ(h.stats().reserved_bytes, 40 * kMiB);
  auto log = h.take_log();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0], (SegmentEvent{SegmentAction::kMap, h.model.address(a), 20 * kMiB}));
  EXPECT_EQ(log[1], (SegmentEvent{SegmentAction::kMap, h.model.address(a) + 20 * kMiB, 20 * kMiB}));
  // Small requests use their own segment with 2 MiB pages.
  h.model.malloc(1000, 0);
  EXPECT_EQ(h.stats().reserved_bytes, 42 * kMiB);
  log = h.take_log();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].size, 2 * kMiB);
  // Freed pages go back only through the release paths, whole pages only.
  h.model.free(a);
  h.model.empty_cache();
  EXPECT_EQ(h.stats().reserved_bytes, 42 * kMiB);  // page 0 is still partly used by b
  h.model.free(b);
  h.model.empty_cache();
  EXPECT_EQ(h.stats().reserved_bytes, 2 * kMiB);
  log = h.take_log();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].action, SegmentAction::kUnmap);
  EXPECT_EQ(log[0].size, 40 * kMiB);
}

TEST(CachingAllocatorTest, ExpandableMapFailureReleasesCacheAndRetries) {
  Harness h("expandable_segments:True", 60 * kMiB);
  const BlockHandle small = h.model.malloc(2 * kMiB, 0);  // large pool: maps one 20 MiB page
  const BlockHandle big = h.model.malloc(30 * kMiB, 0);   // grows to 40 MiB
  h.model.free(big);
  h.model.malloc(2 * kMiB, 1);  // another stream: its own segment, 20 MiB → 60 MiB reserved
  h.take_log();
  // Stream 0 has a 38 MiB free block; 50 MiB needs one more page: 80 > 60 MiB fails. The
  // release path unmaps the one whole free page (20 MiB) and retries, which now needs two
  // pages and fails too: OOM, with the unmapped page given back.
  EXPECT_EQ(h.model.malloc(50 * kMiB, 0), kNoBlock);
  EXPECT_EQ(h.stats().num_alloc_retries, 1u);
  EXPECT_EQ(h.stats().num_ooms, 1u);
  EXPECT_EQ(h.stats().reserved_bytes, 40 * kMiB);
  const auto log = h.take_log();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].action, SegmentAction::kUnmap);
  EXPECT_EQ(log[0].size, 20 * kMiB);
  EXPECT_EQ(h.stats().allocated_bytes, 4 * kMiB);
  h.model.free(small);
}

}  // namespace
}  // namespace fragscope::alloc

namespace fragscope::alloc {
namespace {

// memory_bytes bounds what the model holds, so that replays run at once fit a budget: it grows
// with the blocks a trace keeps live and with the pools its streams open, never shrinks.
TEST(CachingAllocatorTest, MemoryBytesFollowsTheBlocksAndPoolsItHolds) {
  Harness h("");
  const std::uint64_t empty = h.model.memory_bytes();
  std::vector<BlockHandle> live;
  for (int i = 0; i < 100000; ++i) live.push_back(h.model.malloc(512, 0));
  const std::uint64_t blocks = h.model.memory_bytes();
  EXPECT_GE(blocks - empty, 100000u * 56);  // at least the blocks themselves
  EXPECT_LE(blocks - empty, 100000u * 400);
  for (BlockHandle b : live) h.model.free(b);
  EXPECT_GE(h.model.memory_bytes(), blocks);  // the peak stays counted
  for (StreamId s = 1; s <= 100; ++s) h.model.free(h.model.malloc(512, s));
  EXPECT_GE(h.model.memory_bytes() - blocks, 100u * 24 * 1024);  // a free-block set per new pool
}

}  // namespace
}  // namespace fragscope::alloc
