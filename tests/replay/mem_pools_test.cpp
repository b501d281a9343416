// Which pool served each allocation of a trace, from the end state's segment_pool_id.
#include "replay/mem_pools.h"

#include <gtest/gtest.h>

#include "replay/prepared_trace.h"

namespace fragscope::replay {
namespace {

using snapshot::TraceAction;
constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kBase = 0x7f0000000000;
constexpr std::uint64_t kCaptureStream = 904130608;

snapshot::TraceEvent event(TraceAction action, std::uint64_t addr, std::uint64_t size, std::uint64_t stream) {
  snapshot::TraceEvent e;
  e.action = action;
  e.addr = addr;
  e.size = size;
  e.stream = stream;
  return e;
}

void add_segment(snapshot::Snapshot& s, std::uint64_t address, std::uint64_t size, std::uint64_t stream,
                 PoolIdPair pool) {
  snapshot::Segment seg;
  seg.address = address;
  seg.total_size = size;
  seg.stream = stream;
  seg.pool_id = pool;
  seg.first_block = static_cast<std::uint32_t>(s.blocks.size());
  seg.block_count = 1;
  s.blocks.push_back({address, size, 0, snapshot::BlockState::kInactive, 0});
  s.segments.push_back(seg);
}

TEST(MemPoolsTest, ABlockBelongsToThePoolOfItsSegmentAtThatTime) {
  // The capture stream first gets a default-pool segment at kBase, released by empty_cache();
  // the graph's pool later gets a segment at the same address, alive at the end.
  snapshot::Snapshot s;
  add_segment(s, kBase, 20 * kMiB, kCaptureStream, {0, 1});
  s.device_traces.push_back({event(TraceAction::kSegmentAlloc, kBase, 20 * kMiB, kCaptureStream),
                             event(TraceAction::kAlloc, kBase, 4 * kMiB, kCaptureStream),
                             event(TraceAction::kFreeRequested, kBase, 4 * kMiB, kCaptureStream),
                             event(TraceAction::kFreeCompleted, kBase, 4 * kMiB, kCaptureStream),
                             event(TraceAction::kSegmentFree, kBase, 20 * kMiB, kCaptureStream),
                             event(TraceAction::kSnapshot, 0, 0, 0),
                             event(TraceAction::kSegmentAlloc, kBase, 20 * kMiB, kCaptureStream),
                             event(TraceAction::kAlloc, kBase, 4 * kMiB, kCaptureStream),
                             event(TraceAction::kOom, 0, 40 * kMiB, kCaptureStream),
                             event(TraceAction::kFreeRequested, kBase, 4 * kMiB, kCaptureStream),
                             event(TraceAction::kFreeCompleted, kBase, 4 * kMiB, kCaptureStream)});
  const PreparedTrace t = prepare_trace(s, 0, "t");
  ASSERT_EQ(t.mem_pools.size(), 2u);
  EXPECT_EQ(t.mem_pools[1], (PoolIdPair{0, 1}));
  std::vector<alloc::MemPoolId> pools;
  for (const Op& op : t.ops) {
    if (op.kind == OpKind::kAlloc || op.kind == OpKind::kOom) pools.push_back(op.pool);
  }
  // The first block is the default pool's; the second and the OOM (same stream) the graph's.
  EXPECT_EQ(pools, (std::vector<alloc::MemPoolId>{0, 1, 1}));
}

TEST(MemPoolsTest, APrivateSegmentFromBeforeTheTraceStartsInItsPool) {
  snapshot::Snapshot s;
  add_segment(s, kBase, 20 * kMiB, kCaptureStream, {0, 3});
  s.device_traces.push_back({event(TraceAction::kAlloc, kBase, 4 * kMiB, kCaptureStream),
                             event(TraceAction::kFreeRequested, kBase, 4 * kMiB, kCaptureStream),
                             event(TraceAction::kFreeCompleted, kBase, 4 * kMiB, kCaptureStream)});
  const PreparedTrace t = prepare_trace(s, 0, "t");
  ASSERT_EQ(t.initial_segments.size(), 1u);
  EXPECT_EQ(t.initial_segments[0].mem_pool, 1u);
  EXPECT_EQ(t.mem_pools[1], (PoolIdPair{0, 3}));
  EXPECT_EQ(t.ops[0].pool, 1u);
}

}  // namespace
}  // namespace fragscope::replay
