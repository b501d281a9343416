// The segment map: each segment as runs of allocated / pending-free / free bytes. By hand: runs
// merge, offsets are contiguous, rows are per device in address order. On every recorded
// snapshot: the rows tile each segment and their sums equal truth.json and memory_stats().
#include "metrics/segment_map.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "../fixture_snapshots.h"
#include "../hand_built_snapshot.h"

namespace fragscope::metrics {
namespace {

using testing::EndStateFixture;
using testing::HandBuiltSnapshot;
using testing::hole;
using testing::live;
using testing::pending;

TEST(SegmentMap, AdjacentBlocksOfOneKindMergeIntoOneRun) {
  HandBuiltSnapshot h;
  h.segment(0x7f0000000000, {live(100, 90), live(200, 150), hole(50), pending(30), pending(20), hole(10)});
  const auto rows = build_segment_map(h.snap, 0);
  ASSERT_EQ(rows.size(), 1u);
  const SegmentRow& row = rows[0];
  EXPECT_EQ(row.address, 0x7f0000000000u);
  EXPECT_EQ(row.total_size, 410u);
  EXPECT_EQ(row.free_bytes, 60u);    // 50 + 10; pending-free bytes are not free yet
  EXPECT_EQ(row.largest_free, 50u);
  ASSERT_EQ(row.runs.size(), 4u);
  const struct { RunKind kind; std::uint64_t offset, size, requested; } expected[] = {
      {RunKind::kAllocated, 0, 300, 240}, {RunKind::kFree, 300, 50, 0},
      {RunKind::kPendingFree, 350, 50, 0}, {RunKind::kFree, 400, 10, 0}};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(row.runs[i].kind, expected[i].kind) << i;
    EXPECT_EQ(row.runs[i].offset, expected[i].offset) << i;
    EXPECT_EQ(row.runs[i].size, expected[i].size) << i;
    EXPECT_EQ(row.runs[i].requested, expected[i].requested) << i;
  }
}

TEST(SegmentMap, RowsAreOneDevicesSegmentsInAddressOrder) {
  HandBuiltSnapshot h;
  h.segment(0x5000000, {hole(2 << 20)}, {.device = 1})        // index 0, another device
      .segment(0x9000000, {live(4 << 20, 4 << 20)})          // index 1
      .segment(0x3000000, {hole(1 << 20), live(1 << 20, 1)})  // index 2, lower address
      .segment(0x6000000, {live(2 << 20, 7)});                 // index 3
  const auto rows = build_segment_map(h.snap, 0);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].address, 0x3000000u);
  EXPECT_EQ(rows[0].segment_index, 2u);
  EXPECT_EQ(rows[1].address, 0x6000000u);
  EXPECT_EQ(rows[1].segment_index, 3u);
  EXPECT_EQ(rows[2].address, 0x9000000u);
  EXPECT_EQ(rows[2].segment_index, 1u);
  const auto other = build_segment_map(h.snap, 1);
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(other[0].segment_index, 0u);
  EXPECT_EQ(other[0].free_bytes, 2u << 20);
  ASSERT_EQ(other[0].runs.size(), 1u);  // a wholly free segment is one free run
  EXPECT_EQ(other[0].runs[0].kind, RunKind::kFree);
  EXPECT_TRUE(build_segment_map(h.snap, 2).empty());
}

TEST(SegmentMap, EmptySnapshotHasNoRows) {
  const HandBuiltSnapshot h;
  EXPECT_TRUE(build_segment_map(h.snap, 0).empty());
}

class RecordedSegmentMap : public ::testing::TestWithParam<EndStateFixture> {};

TEST_P(RecordedSegmentMap, RowsTileEverySegmentExactly) {
  const auto& f = GetParam();
  const auto rows = build_segment_map(f.read(), 0);
  ASSERT_EQ(rows.size(), f.truth["segments"].get<std::size_t>());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const SegmentRow& row = rows[i];
    if (i > 0) {
      EXPECT_GE(row.address, rows[i - 1].address + rows[i - 1].total_size) << "rows overlap at " << i;
    }
    ASSERT_FALSE(row.runs.empty());
    std::uint64_t offset = 0, free = 0, largest_run = 0;
    for (std::size_t r = 0; r < row.runs.size(); ++r) {
      const SegmentRun& run = row.runs[r];
      EXPECT_EQ(run.offset, offset) << "row " << i << " run " << r;
      EXPECT_GT(run.size, 0u);
      if (r > 0) {
        EXPECT_NE(run.kind, row.runs[r - 1].kind) << "unmerged runs in row " << i;
      }
      if (run.kind == RunKind::kAllocated) {
        EXPECT_LE(run.requested, run.size);
      } else {
        EXPECT_EQ(run.requested, 0u);
      }
      if (run.kind == RunKind::kFree) {
        free += run.size;
        largest_run = std::max(largest_run, run.size);
      }
      offset += run.size;
    }
    EXPECT_EQ(offset, row.total_size) << "row " << i;
    EXPECT_EQ(free, row.free_bytes) << "row " << i;
    // PyTorch merges neighbouring free blocks, so a free run is one block: the largest is exact.
    EXPECT_EQ(largest_run, row.largest_free) << "row " << i;
  }
}

TEST_P(RecordedSegmentMap, SumsEqualTruthAndMemoryStats) {
  const auto& f = GetParam();
  const auto rows = build_segment_map(f.read(), 0);
  std::uint64_t reserved = 0, allocated = 0, requested = 0, free = 0, largest = 0, free_in_split = 0;
  for (const SegmentRow& row : rows) {
    reserved += row.total_size;
    free += row.free_bytes;
    largest = std::max(largest, row.largest_free);
    if (row.free_bytes != row.total_size) free_in_split += row.free_bytes;
    for (const SegmentRun& run : row.runs) {
      if (run.kind != RunKind::kAllocated) continue;
      allocated += run.size;
      requested += run.requested;
    }
  }
  const auto stat = [&](const char* key) { return f.stats.at(key).get<std::uint64_t>(); };
  EXPECT_EQ(reserved, f.truth["total_reserved"].get<std::uint64_t>());
  EXPECT_EQ(requested, f.truth["total_allocated"].get<std::uint64_t>());
  EXPECT_EQ(largest, f.truth["largest_free_block"].get<std::uint64_t>());
  EXPECT_EQ(allocated, stat("allocated_bytes.all.current"));
  // Reserved but not active (active = allocated + waiting on stream events) is what is free.
  EXPECT_EQ(free, stat("reserved_bytes.all.current") - stat("active_bytes.all.current"));
  // memory_stats' inactive_split_bytes: free blocks inside segments that also hold others.
  if (!f.expandable()) {
    EXPECT_EQ(free_in_split, stat("inactive_split_bytes.all.current"));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RecordedSegmentMap, ::testing::ValuesIn(testing::end_state_fixtures()),
                         testing::fixture_name);

}  // namespace
}  // namespace fragscope::metrics
