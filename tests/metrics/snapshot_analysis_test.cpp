// analyze_snapshot puts the parts together: devices, per (pool, stream) totals, expandable
// segments, the driver's reading at the OOM and the trace window. (snapshot_truth_test checks
// its totals against truth.json; this file checks what the analysis adds), private pools.
#include "metrics/snapshot_analysis.h"

#include <algorithm>
#include <set>
#include <utility>

#include <gtest/gtest.h>

#include "../fixture_snapshots.h"
#include "../hand_built_snapshot.h"
#include "snapshot/snapshot_reader.h"

namespace fragscope::metrics {
namespace {

using snapshot::PoolKind;
using snapshot::TraceAction;
using testing::EndStateFixture;
using testing::HandBuiltSnapshot;
using testing::hole;
using testing::live;
using PoolId = std::pair<std::int64_t, std::int64_t>;

TEST(SnapshotAnalysis, DevicesAreThoseWithSegmentsOrATrace) {
  HandBuiltSnapshot h;
  h.segment(0x200000, {live(512, 512)}, {.device = 1}).segment(0x400000, {hole(512)}, {.device = 3});
  h.event(0, TraceAction::kAlloc, 1, 512).event(4, TraceAction::kAlloc, 1, 512);  // devices 1-3 have no trace
  const auto a = analyze_snapshot(h.snap, 1);
  EXPECT_EQ(a.devices, (std::vector<int>{0, 1, 3, 4}));
  EXPECT_EQ(a.device, 1);
  EXPECT_EQ(a.totals.segments, 1u);  // totals, sites and map are of the chosen device only
  EXPECT_EQ(a.segment_map.size(), 1u);
  EXPECT_EQ(a.trace.entries, 0u);
}

TEST(SnapshotAnalysis, TotalsPerPoolAndStreamAreSeparateAndAddUp) {
  HandBuiltSnapshot h;
  h.segment(0x200000, {live(512, 500), hole(2 * 1024 * 1024 - 512)}, {.pool = PoolKind::kSmall})
      .segment(0x400000, {live(8 << 20, 8 << 20), hole(12 << 20)})
      .segment(0x2000000, {hole(4 << 20)}, {.stream = 0xabc})
      .segment(0x3000000, {live(6 << 20, 6 << 20)})
      .segment(0x4000000, {live(2 << 20, 2 << 20)}, {.pool = PoolKind::kSmall, .stream = 0xabc, .expandable = true});
  const auto a = analyze_snapshot(h.snap, 0);
  ASSERT_EQ(a.by_pool_stream.size(), 4u);
  std::set<std::pair<PoolKind, std::uint64_t>> keys;
  MemoryTotals sum;
  for (const auto& g : a.by_pool_stream) {
    keys.insert({g.pool, g.stream});
    sum.reserved_bytes += g.totals.reserved_bytes;
    sum.inactive_bytes += g.totals.inactive_bytes;
    sum.segments += g.totals.segments;
    if (g.pool == PoolKind::kLarge && g.stream == 0) {
      EXPECT_EQ(g.totals.segments, 2u);
      EXPECT_EQ(g.totals.reserved_bytes, 26u << 20);
      EXPECT_EQ(g.totals.largest_free_block, 12u << 20);
    }
    if (g.pool == PoolKind::kLarge && g.stream == 0xabc) {
      EXPECT_EQ(g.totals.inactive_bytes, 4u << 20);  // free, but only for work on stream 0xabc
    }
  }
  EXPECT_EQ(keys.size(), 4u);
  EXPECT_EQ(sum.reserved_bytes, a.totals.reserved_bytes);
  EXPECT_EQ(sum.inactive_bytes, a.totals.inactive_bytes);
  EXPECT_EQ(sum.segments, 5u);
  EXPECT_EQ(a.expandable_segments, 1u);
  EXPECT_EQ(a.largest_cached_allocation, 12u << 20);
}

TEST(SnapshotAnalysis, DriverFreeIsTheLastOomsReadingAndTheWindowIsAnchoredAtTheEnd) {
  HandBuiltSnapshot h;
  h.segment(0x400000, {live(20 << 20, 20 << 20), hole(10 << 20)});  // 30 MiB reserved at the end
  h.event(0, TraceAction::kSegmentAlloc, 0x9000000, 50 << 20)  // 50 MiB more than at the start
      .event(0, TraceAction::kOom, 111, 1 << 30)
      .event(0, TraceAction::kSegmentFree, 0x9000000, 50 << 20)
      .event(0, TraceAction::kSegmentAlloc, 0x400000, 30 << 20)
      .event(0, TraceAction::kOom, 222, 1 << 30);
  const auto a = analyze_snapshot(h.snap, 0);
  ASSERT_TRUE(a.driver_free_bytes.has_value());
  EXPECT_EQ(*a.driver_free_bytes, 222u);
  EXPECT_EQ(a.reserved_at_trace_start, 0);
  EXPECT_EQ(a.trace_peak_reserved, 50 << 20);
  EXPECT_EQ(a.trace.ooms.size(), 2u);
}

TEST(SnapshotAnalysis, EmptySnapshotHasNothingAndNoDriverReading) {
  const HandBuiltSnapshot h;
  const auto a = analyze_snapshot(h.snap, 0);
  EXPECT_TRUE(a.devices.empty());
  EXPECT_TRUE(a.by_pool_stream.empty());
  EXPECT_TRUE(a.top_sites.empty());
  EXPECT_TRUE(a.segment_map.empty());
  EXPECT_FALSE(a.driver_free_bytes.has_value());
  EXPECT_EQ(a.largest_cached_allocation, 0u);
  EXPECT_EQ(a.reserved_at_trace_start, 0);
}

// A real torch.compile(mode="reduce-overhead") recording (tests/data/field/cro_cal): the CUDA
// graph's private pool (segment_pool_id (0, 1)) is counted apart, and its free blocks do not
// serve a default-pool request.
TEST(SnapshotAnalysis, ACudaGraphPoolIsCountedApart) {
  const snapshot::Snapshot s =
      snapshot::read_snapshot_file(std::string(FRAGSCOPE_SOURCE_DIR) + "/tests/data/field/cro_cal/snapshot.pickle.zst");
  const SnapshotAnalysis a = analyze_snapshot(s, 0);
  std::uint64_t graph_reserved = 0, graph_free = 0, default_largest_free = 0, graph_largest_free = 0;
  for (const snapshot::Segment& segment : s.segments) {
    const bool graph = segment.pool_id == PoolId{0, 1};
    if (graph) graph_reserved += segment.total_size;
    for (const snapshot::Block& b : s.blocks_of(segment)) {
      if (b.state != snapshot::BlockState::kInactive) continue;
      if (graph) {
        graph_free += b.size;
        graph_largest_free = std::max(graph_largest_free, b.size);
      } else {
        default_largest_free = std::max(default_largest_free, b.size);
      }
    }
  }
  ASSERT_GT(graph_reserved, 0u);
  EXPECT_EQ(a.private_pools.reserved_bytes, graph_reserved);
  EXPECT_EQ(a.private_pools.inactive_bytes, graph_free);
  // A default-pool request can use only the default pools' free blocks.
  EXPECT_EQ(a.largest_cached_allocation, default_largest_free);
  EXPECT_EQ(a.totals.largest_free_block, std::max(default_largest_free, graph_largest_free));

  std::size_t graph_rows = 0;
  for (const PoolStreamTotals& g : a.by_pool_stream) graph_rows += g.mem_pool == PoolId{0, 1};
  EXPECT_EQ(graph_rows, 2u);  // small and large, on the capture stream
  std::size_t graph_segments = 0;
  for (const SegmentRow& row : a.segment_map) graph_segments += row.pool_id == PoolId{0, 1};
  EXPECT_EQ(graph_segments, 101u);
}

class RecordedAnalysis : public ::testing::TestWithParam<EndStateFixture> {};

TEST_P(RecordedAnalysis, PartsAgreeWithTruthAndMemoryStats) {
  const auto& f = GetParam();
  const auto a = analyze_snapshot(f.read(), 0, 3);
  EXPECT_EQ(a.devices, std::vector<int>{0});  // one H200
  EXPECT_EQ(a.segment_map.size(), f.truth["segments"].get<std::size_t>());
  const auto every_site = top_allocation_sites(f.read(), 0, 1000000);
  EXPECT_EQ(a.top_sites.size(), std::min<std::size_t>(3, every_site.size()));  // midrun_default: all unattributed
  EXPECT_EQ(a.largest_cached_allocation, f.truth["largest_free_block"].get<std::uint64_t>());
  EXPECT_EQ(a.reserved_at_trace_start, f.truth["reserved_at_trace_start"].get<std::int64_t>());
  EXPECT_EQ(a.trace_peak_reserved, f.stats.at("reserved_bytes.all.peak").get<std::int64_t>());
  if (f.oom()) {
    ASSERT_TRUE(a.driver_free_bytes.has_value());
    EXPECT_EQ(*a.driver_free_bytes, f.truth["oom_event"]["device_free"].get<std::uint64_t>());
  } else {
    EXPECT_FALSE(a.driver_free_bytes.has_value());
  }
  // Every segment of an expandable_segments run is expandable; none otherwise.
  EXPECT_EQ(a.expandable_segments, f.expandable() ? a.totals.segments : 0u);
}

TEST_P(RecordedAnalysis, PoolStreamGroupsAddUpToPyTorchsPoolCounters) {
  const auto& f = GetParam();
  const auto a = analyze_snapshot(f.read(), 0);
  std::map<PoolKind, std::uint64_t> reserved, allocated;
  std::set<std::uint64_t> streams;
  for (const auto& g : a.by_pool_stream) {
    reserved[g.pool] += g.totals.reserved_bytes;
    allocated[g.pool] += g.totals.allocated_bytes;
    streams.insert(g.stream);
  }
  const auto stat = [&](const char* key) { return f.stats.at(key).get<std::uint64_t>(); };
  EXPECT_EQ(reserved[PoolKind::kSmall], stat("reserved_bytes.small_pool.current"));
  EXPECT_EQ(reserved[PoolKind::kLarge], stat("reserved_bytes.large_pool.current"));
  EXPECT_EQ(allocated[PoolKind::kSmall], stat("allocated_bytes.small_pool.current"));
  EXPECT_EQ(allocated[PoolKind::kLarge], stat("allocated_bytes.large_pool.current"));
  // FSDP's all-gather and reduce-scatter run on a second stream with segments of their own.
  if (f.truth["workload"].value("fsdp", false)) {
    EXPECT_GE(streams.size(), 2u) << f.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RecordedAnalysis, ::testing::ValuesIn(testing::end_state_fixtures()),
                         testing::fixture_name);

}  // namespace
}  // namespace fragscope::metrics
