// Private pools in the analysis and the segment map, on a real torch.compile(mode=
// "reduce-overhead") recording (tests/data/field/cro_cal: a CUDA graph pool, segment_pool_id (0, 1)).
#include "metrics/snapshot_analysis.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <utility>

#include "snapshot/snapshot_reader.h"

namespace fragscope::metrics {
namespace {

using PoolId = std::pair<std::int64_t, std::int64_t>;

TEST(SnapshotAnalysisTest, ACudaGraphPoolIsCountedApart) {
  const snapshot::Snapshot s =
      snapshot::read_snapshot_file(std::string(FRAGSCOPE_SOURCE_DIR) + "/tests/data/field/cro_cal/snapshot.pickle.gz");
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

}  // namespace
}  // namespace fragscope::metrics
