#include "view/trace_index.h"

#include <algorithm>
#include <random>

#include <gtest/gtest.h>

#include "diagnose/segment_map_at_event.h"
#include "fixture_snapshots.h"
#include "metrics/snapshot_analysis.h"

namespace fragscope::view {
namespace {

using testing::EndStateFixture;

class TraceIndexTest : public ::testing::TestWithParam<EndStateFixture> {};

/// Requested bytes of the end-state blocks still holding memory (allocated or pending free).
std::uint64_t end_active_bytes(const snapshot::Snapshot& snapshot, int device) {
  std::uint64_t bytes = 0;
  for (const auto& segment : snapshot.segments) {
    if (segment.device != device) continue;
    for (const auto& block : snapshot.blocks_of(segment))
      if (block.state != snapshot::BlockState::kInactive) bytes += block.requested_size;
  }
  return bytes;
}

TEST_P(TraceIndexTest, TheLastEventIsTheEndStateAnalyzeReports) {
  const auto& snapshot = GetParam().read();
  const int device = snapshot::busiest_device(snapshot);
  if (snapshot.trace(device).empty()) GTEST_SKIP() << "no trace";
  const TraceIndex index(snapshot, device, GetParam().name);
  const auto analysis = metrics::analyze_snapshot(snapshot, device);
  const std::uint32_t last = index.event_count() - 1;
  EXPECT_EQ(index.event_count(), analysis.trace.entries);
  EXPECT_EQ(index.curves.reserved_after(last), analysis.totals.reserved_bytes);
  EXPECT_EQ(index.curves.initial_reserved(), static_cast<std::uint64_t>(analysis.reserved_at_trace_start));
  EXPECT_EQ(index.curves.extremes(0, last).reserved_max, static_cast<std::uint64_t>(analysis.trace_peak_reserved));
  EXPECT_EQ(index.curves.active_after(last), end_active_bytes(snapshot, device));

  // The segment map after the last event is analyze's, segment by segment.
  const auto segments = index.segments.at(last);
  ASSERT_EQ(segments.size(), analysis.segment_map.size());
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const auto& row = analysis.segment_map[i];
    EXPECT_EQ(segments[i].address, row.address) << i;
    EXPECT_EQ(segments[i].size, row.total_size) << i;
    std::uint64_t pending = 0;
    for (const auto& run : row.runs)
      if (run.kind == metrics::RunKind::kPendingFree) pending += run.size;
    EXPECT_EQ(segments[i].free_bytes, row.free_bytes + pending) << "segment " << i << " at " << row.address;
    EXPECT_EQ(segments[i].largest_free >= row.largest_free, true) << i;
  }
}

TEST_P(TraceIndexTest, ExtremesAndLiveSetsMatchAWalkOverEveryEvent) {
  const auto& snapshot = GetParam().read();
  const int device = snapshot::busiest_device(snapshot);
  if (snapshot.trace(device).empty()) GTEST_SKIP() << "no trace";
  const TraceIndex index(snapshot, device, GetParam().name);
  const std::uint32_t n = index.event_count();
  std::mt19937 random(7);
  for (int round = 0; round < 200; ++round) {
    std::uint32_t a = random() % n, b = random() % n;
    if (round % 4 == 0) b = std::min(n - 1, a + static_cast<std::uint32_t>(random() % 300));
    if (a > b) std::swap(a, b);
    CurveExtremes expected{index.curves.active_after(a), a, index.curves.active_after(a),
                           index.curves.reserved_after(a), index.curves.reserved_after(a)};
    for (std::uint32_t i = a; i <= b; ++i) {
      const auto active = index.curves.active_after(i), reserved = index.curves.reserved_after(i);
      if (active > expected.active_max) expected.active_max = active, expected.active_max_event = i;
      expected.active_min = std::min(expected.active_min, active);
      expected.reserved_max = std::max(expected.reserved_max, reserved);
      expected.reserved_min = std::min(expected.reserved_min, reserved);
    }
    const CurveExtremes got = index.curves.extremes(a, b);
    EXPECT_EQ(got.active_max, expected.active_max) << a << ".." << b;
    EXPECT_EQ(got.active_max_event, expected.active_max_event) << a << ".." << b;
    EXPECT_EQ(got.active_min, expected.active_min) << a << ".." << b;
    EXPECT_EQ(got.reserved_max, expected.reserved_max) << a << ".." << b;
    EXPECT_EQ(got.reserved_min, expected.reserved_min) << a << ".." << b;
  }
  for (int round = 0; round < 20; ++round) {
    const std::uint32_t event = round == 0 ? n - 1 : random() % n;
    std::vector<AllocationId> expected;
    std::uint64_t bytes = 0;
    for (AllocationId id = 0; id < index.allocations.size(); ++id) {
      if (index.allocations[id].alive_after(event)) {
        expected.push_back(id);
        bytes += index.allocations[id].size;
      }
    }
    EXPECT_EQ(index.live.alive_after(event), expected) << "event " << event;
    EXPECT_EQ(bytes, index.curves.active_after(event)) << "event " << event;
  }
}

TEST_P(TraceIndexTest, TheSegmentsAtTheOomAreTheDoctorsMap) {
  const auto& snapshot = GetParam().read();
  const int device = snapshot::busiest_device(snapshot);
  const auto oom = snapshot::last_oom_index(snapshot, device);
  if (!oom) GTEST_SKIP() << "no OOM in the trace";
  const TraceIndex index(snapshot, device, GetParam().name);
  const auto ours = index.segments.at(static_cast<std::uint32_t>(*oom));
  const auto doctors = diagnose::segment_map_at_event(snapshot, device, *oom);
  ASSERT_EQ(ours.size(), doctors.size());
  std::uint64_t our_free = 0, doctor_free = 0;
  for (std::size_t i = 0; i < ours.size(); ++i) {
    EXPECT_EQ(ours[i].address, doctors[i].address) << i;
    EXPECT_EQ(ours[i].size, doctors[i].total_size) << i;
    our_free += ours[i].free_bytes;
    for (const auto& run : doctors[i].runs)
      if (run.kind != metrics::RunKind::kAllocated) doctor_free += run.size;
  }
  EXPECT_EQ(our_free, doctor_free);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TraceIndexTest, ::testing::ValuesIn(testing::end_state_fixtures()),
                         testing::fixture_name);

}  // namespace
}  // namespace fragscope::view
