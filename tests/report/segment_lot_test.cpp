// The parking lot of the HTML report: every segment in exactly one slot, the small ones grouped
// with their totals kept, and every free byte in the hole-size bucket of its hole.
#include "report/segment_lot.h"

#include <gtest/gtest.h>

#include "recorded_diagnosis.h"
#include "util/bytes.h"

namespace fragscope::report {
namespace {

using metrics::RunKind;
using metrics::SegmentRow;

SegmentRow segment(std::uint64_t address, std::uint64_t size, std::uint64_t free_at_end,
                   std::pair<std::int64_t, std::int64_t> pool = {0, 0}) {
  SegmentRow row;
  row.address = address;
  row.pool_id = pool;
  row.total_size = size;
  row.free_bytes = free_at_end;
  row.largest_free = free_at_end;
  row.runs.push_back({RunKind::kAllocated, 0, size - free_at_end, size - free_at_end});
  if (free_at_end) row.runs.push_back({RunKind::kFree, size - free_at_end, free_at_end, 0});
  return row;
}

TEST(SegmentLot, EverySegmentOfTheRecordedOomIsInOneSlot) {
  const auto& d = testing::recorded_diagnosis("frag_oom_104");
  const SegmentLot lot = arrange_segment_lot(d.segment_map);
  std::size_t segments = 0, grouped = 0;
  std::uint64_t bytes = 0, free_bytes = 0;
  for (const LotSlot& s : lot.slots) {
    segments += s.segments;
    bytes += s.total_bytes;
    free_bytes += s.free_bytes;
    if (s.segments > 1) grouped += s.segments;
    EXPECT_EQ(s.row != nullptr, s.segments == 1);
  }
  EXPECT_EQ(segments, d.segment_map.size());
  EXPECT_EQ(segments, lot.totals.segments);
  EXPECT_EQ(bytes, lot.totals.reserved_bytes);
  EXPECT_EQ(free_bytes, lot.totals.free_bytes);
  EXPECT_GT(grouped, 0u) << "the 2 MiB segments are too small to see alone";
  for (std::size_t i = 1; i < lot.slots.size(); ++i)
    EXPECT_GE(lot.slots[i - 1].largest_segment_bytes, lot.slots[i].smallest_segment_bytes) << "largest first";
}

TEST(SegmentLot, SmallSegmentsGroupUntilVisibleAndNeverAcrossPools) {
  std::vector<SegmentRow> rows = {segment(0x1000000, 100 * kMiB, 10 * kMiB)};
  for (int i = 0; i < 10; ++i) rows.push_back(segment(0x2000000 + i * 2 * kMiB, 2 * kMiB, kMiB));
  rows.push_back(segment(0x9000000, 2 * kMiB, 2 * kMiB, {0, 1}));  // a CUDA graph's pool
  // 122 MiB over 20 = 6.1 MiB: a 2 MiB segment is small; a group takes more until it reaches that.
  // Largest first, the emptier first among equals: the wholly free private one comes second.
  const SegmentLot lot = arrange_segment_lot(rows, 20);
  ASSERT_EQ(lot.slots.size(), 5u);
  EXPECT_EQ(lot.slots[0].row, &rows[0]);
  EXPECT_TRUE(lot.slots[1].private_pool);
  EXPECT_EQ(lot.slots[1].row, &rows.back()) << "a group of one is its segment";
  EXPECT_EQ(lot.slots[2].segments, 4u) << "a default-pool segment never joins the private one";
  EXPECT_EQ(lot.slots[2].free_bytes, 4 * kMiB);
  EXPECT_EQ(lot.slots[2].largest_free_bytes, kMiB);
  EXPECT_EQ(lot.slots[3].segments, 4u);
  EXPECT_EQ(lot.slots[4].segments, 2u);
  EXPECT_EQ(lot.slots[4].smallest_segment_bytes, 2 * kMiB);
}

TEST(SegmentLot, HoleBucketsHoldEveryFreeRunByItsSize) {
  std::vector<SegmentRow> rows = {segment(0x1000000, 64 * kMiB, 3 * kMiB), segment(0x5000000, 64 * kMiB, 40 * kMiB),
                                  segment(0x9000000, 8 * kMiB, 0)};
  const SegmentLot lot = arrange_segment_lot(rows);
  ASSERT_EQ(lot.holes.size(), 5u);  // [2, 4) MiB up to [32, 64) MiB
  EXPECT_EQ(lot.holes.front().low, 2 * kMiB);
  EXPECT_EQ(lot.holes.front().bytes, 3 * kMiB);
  EXPECT_EQ(lot.holes.back().low, 32 * kMiB);
  EXPECT_EQ(lot.holes.back().holes, 1u);
  EXPECT_EQ(lot.holes.back().bytes, 40 * kMiB);
  EXPECT_EQ(lot.holes[2].holes, 0u);
  EXPECT_EQ(lot.totals.largest_free_bytes, 40 * kMiB);
}

}  // namespace
}  // namespace fragscope::report
