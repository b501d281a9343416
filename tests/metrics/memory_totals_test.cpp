// MemoryTotals: the segsum arithmetic per block state, checked by hand on small segments and,
// on every recorded end-state snapshot, against torch.cuda.memory_stats() taken at the same
// moment (PyTorch's own counters: reserved, allocated, active, per pool).
#include "metrics/memory_totals.h"

#include <gtest/gtest.h>

#include "../fixture_snapshots.h"
#include "../hand_built_snapshot.h"

namespace fragscope::metrics {
namespace {

using snapshot::PoolKind;
using snapshot::Segment;
using testing::EndStateFixture;
using testing::HandBuiltSnapshot;
using testing::hole;
using testing::live;
using testing::pending;

TEST(MemoryTotals, EveryBlockStateLandsInItsOwnTotal) {
  HandBuiltSnapshot h;
  h.segment(0x1000000, {live(1000, 900), hole(3000), pending(500), hole(1000), live(2000, 2000)});
  const MemoryTotals t = compute_totals(h.snap);
  EXPECT_EQ(t.segments, 1u);
  EXPECT_EQ(t.blocks, 5u);
  EXPECT_EQ(t.reserved_bytes, 7500u);
  EXPECT_EQ(t.allocated_bytes, 3000u);        // 1000 + 2000, rounded sizes
  EXPECT_EQ(t.requested_bytes, 2900u);        // 900 + 2000
  EXPECT_EQ(t.free_internal_bytes, 100u);     // 1000 - 900
  EXPECT_EQ(t.free_external_bytes, 4500u);    // 3000 + 500 + 1000: pending free is not allocated
  EXPECT_EQ(t.inactive_bytes, 4000u);         // only inactive blocks can be handed out
  EXPECT_EQ(t.pending_free_bytes, 500u);
  EXPECT_EQ(t.inactive_blocks, 2u);
  EXPECT_EQ(t.largest_free_block, 3000u);     // the pending block is not a free block
  EXPECT_DOUBLE_EQ(t.fragmentation_index(), 1.0 - 3000.0 / 4000.0);
  EXPECT_EQ(t.requested_bytes + t.free_internal_bytes + t.free_external_bytes, t.reserved_bytes);
}

TEST(MemoryTotals, EmptySnapshotIsAllZeroAndNotFragmented) {
  const HandBuiltSnapshot h;
  const MemoryTotals t = compute_totals(h.snap);
  EXPECT_EQ(t.segments, 0u);
  EXPECT_EQ(t.blocks, 0u);
  EXPECT_EQ(t.reserved_bytes, 0u);
  EXPECT_EQ(t.largest_free_block, 0u);
  EXPECT_EQ(t.fragmentation_index(), 0.0);
}

TEST(MemoryTotals, FragmentationIndexIsZeroForOneHoleOrNoHole) {
  HandBuiltSnapshot one_hole;
  one_hole.segment(0x200000, {live(4096, 4096), hole(8192)});
  EXPECT_EQ(compute_totals(one_hole.snap).fragmentation_index(), 0.0);
  HandBuiltSnapshot full;
  full.segment(0x200000, {live(4096, 4000), live(4096, 4096)});
  EXPECT_EQ(compute_totals(full.snap).fragmentation_index(), 0.0);
  // Many equal holes: 1 - 1/n.
  HandBuiltSnapshot scattered;
  scattered.segment(0x200000,
                    {hole(512), live(512, 512), hole(512), live(512, 512), hole(512), live(512, 512), hole(512)});
  EXPECT_DOUBLE_EQ(compute_totals(scattered.snap).fragmentation_index(), 0.75);
}

TEST(MemoryTotals, ZeroSizeBlocksCountButAddNoBytes) {
  HandBuiltSnapshot h;
  h.segment(0x200000, {hole(0), live(0, 0), live(512, 512)});
  const MemoryTotals t = compute_totals(h.snap);
  EXPECT_EQ(t.blocks, 3u);
  EXPECT_EQ(t.reserved_bytes, 512u);
  EXPECT_EQ(t.inactive_blocks, 1u);
  EXPECT_EQ(t.largest_free_block, 0u);
  EXPECT_EQ(t.fragmentation_index(), 0.0);  // no free bytes: no division by zero
}

TEST(MemoryTotals, RequestedAboveBlockSizeDoesNotUnderflowInternalFree) {
  HandBuiltSnapshot h;
  h.segment(0x200000, {live(512, 600)});
  const MemoryTotals t = compute_totals(h.snap);
  EXPECT_EQ(t.free_internal_bytes, 0u);
  EXPECT_EQ(t.requested_bytes, 600u);
}

TEST(MemoryTotals, KeepSelectsSegmentsAndTheSelectionsAddUp) {
  HandBuiltSnapshot h;
  h.segment(0x200000, {live(512, 500), hole(1536)}, {.pool = PoolKind::kSmall})
      .segment(0x400000, {live(20 << 20, 20 << 20), hole(2 << 20)})
      .segment(0x10000000, {hole(8 << 20)}, {.device = 1});
  const auto small = compute_totals(h.snap, [](const Segment& s) { return s.pool == PoolKind::kSmall; });
  const auto large = compute_totals(h.snap, [](const Segment& s) { return s.pool == PoolKind::kLarge; });
  const auto device1 = compute_totals(h.snap, [](const Segment& s) { return s.device == 1; });
  const auto all = compute_totals(h.snap);
  EXPECT_EQ(small.segments, 1u);
  EXPECT_EQ(small.reserved_bytes, 2048u);
  EXPECT_EQ(large.segments, 2u);
  EXPECT_EQ(large.reserved_bytes, (22u << 20) + (8u << 20));
  EXPECT_EQ(device1.largest_free_block, 8u << 20);
  EXPECT_EQ(small.reserved_bytes + large.reserved_bytes, all.reserved_bytes);
  EXPECT_EQ(small.inactive_bytes + large.inactive_bytes, all.inactive_bytes);
  EXPECT_EQ(all.largest_free_block, 8u << 20);
}

class RecordedTotals : public ::testing::TestWithParam<EndStateFixture> {};

std::uint64_t stat(const EndStateFixture& f, const std::string& key) { return f.stats.at(key).get<std::uint64_t>(); }
std::string fmt_key(const std::string& counter, const std::string& pool) { return counter + "." + pool + ".current"; }

TEST_P(RecordedTotals, EqualPyTorchsOwnCountersAtTheSameMoment) {
  const auto& f = GetParam();
  const MemoryTotals t = compute_totals(f.read());
  EXPECT_EQ(t.reserved_bytes, stat(f, "reserved_bytes.all.current"));
  EXPECT_EQ(t.allocated_bytes, stat(f, "allocated_bytes.all.current"));
  // memory_stats' active bytes still count blocks freed but waiting on stream events.
  EXPECT_EQ(t.allocated_bytes + t.pending_free_bytes, stat(f, "active_bytes.all.current"));
  EXPECT_EQ(t.requested_bytes, f.truth["total_allocated"].get<std::uint64_t>());
  EXPECT_EQ(t.allocated_bytes, t.requested_bytes + t.free_internal_bytes);
  EXPECT_EQ(t.free_external_bytes, t.inactive_bytes + t.pending_free_bytes);
  EXPECT_EQ(t.largest_free_block, f.truth["largest_free_block"].get<std::uint64_t>());
  const double inactive = static_cast<double>(t.inactive_bytes);
  EXPECT_DOUBLE_EQ(t.fragmentation_index(),
                   inactive == 0 ? 0.0 : 1.0 - f.truth["largest_free_block"].get<double>() / inactive);
}

TEST_P(RecordedTotals, PerPoolTotalsEqualPyTorchsPerPoolCounters) {
  const auto& f = GetParam();
  for (const auto& [pool, name] :
       {std::pair{PoolKind::kSmall, "small_pool"}, std::pair{PoolKind::kLarge, "large_pool"}}) {
    const MemoryTotals t = compute_totals(f.read(), [pool](const Segment& s) { return s.pool == pool; });
    EXPECT_EQ(t.reserved_bytes, stat(f, fmt_key("reserved_bytes", name))) << name;
    EXPECT_EQ(t.allocated_bytes, stat(f, fmt_key("allocated_bytes", name))) << name;
    // Expandable segments are one mapped range per snapshot segment, not one cudaMalloc each.
    if (!f.expandable()) {
      EXPECT_EQ(t.segments, stat(f, fmt_key("segment", name))) << name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RecordedTotals, ::testing::ValuesIn(testing::end_state_fixtures()),
                         testing::fixture_name);

}  // namespace
}  // namespace fragscope::metrics
