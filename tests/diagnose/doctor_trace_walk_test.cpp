// The recorded curve and the segment map at the OOM, checked against truth.json's exact
// totals (end state, trace-window peak, and the OOM observer's own snapshot).
#include <gtest/gtest.h>

#include "diagnose/recorded_curve.h"
#include "diagnose/segment_map_at_event.h"
#include "../fixture_support.h"
#include "metrics/segment_map.h"
#include "snapshot/snapshot_reader.h"

namespace fragscope::diagnose {
namespace {

using fragscope::testing::fixtures_dir;
using fragscope::testing::read_json;

TEST(RecordedCurve, EndsAtTheSnapshotTotalsAndPeaksAtTheRecordedPeak) {
  for (const char* scenario : {"fid_default", "eval_spike", "ring_default"}) {
    const auto dir = fixtures_dir() / scenario;
    const auto truth = read_json(dir / "truth.json");
    const auto snap = snapshot::read_snapshot_file((dir / "snapshot.pickle.zst").string());
    const RecordedCurve curve = walk_recorded_curve(snap, 0);
    ASSERT_EQ(curve.allocated.size(), truth["trace_entries"].get<std::size_t>()) << scenario;
    EXPECT_EQ(curve.reserved.back(), truth["total_reserved"].get<std::uint64_t>()) << scenario;
    EXPECT_EQ(curve.allocated.back(), truth["total_allocated"].get<std::uint64_t>()) << scenario;
    EXPECT_EQ(*std::max_element(curve.reserved.begin(), curve.reserved.end()),
              truth["trace_window_peak_reserved"].get<std::uint64_t>()) << scenario;
    const auto points = downsample_curve(curve, 100);
    ASSERT_EQ(points.size(), 100u);
    EXPECT_EQ(points.back().trace_index, curve.allocated.size() - 1);
    EXPECT_EQ(points.back().reserved, *std::max_element(curve.reserved.end() - static_cast<std::ptrdiff_t>(curve.reserved.size() / 100) - 1, curve.reserved.end()));
    // Each point holds its stretch's extremes: the minima too, so a dip shows as well as a spike.
    const std::size_t n = curve.allocated.size();
    const auto stretch = static_cast<std::ptrdiff_t>(99 * n / 100);
    EXPECT_EQ(points.back().allocated_min, *std::min_element(curve.allocated.begin() + stretch, curve.allocated.end()));
    EXPECT_EQ(points.back().reserved_min, *std::min_element(curve.reserved.begin() + stretch, curve.reserved.end()));
    for (const CurvePoint& p : points) {
      EXPECT_LE(p.allocated_min, p.allocated);
      EXPECT_LE(p.reserved_min, p.reserved);
    }
  }
}

TEST(SegmentMapAtEvent, RebuildsWhatTheOomObserverSaw) {
  const auto dir = fixtures_dir() / "frag_oom_observer";
  const auto truth = read_json(dir / "truth.json");
  const auto after = snapshot::read_snapshot_file((dir / "snapshot.pickle.zst").string());
  const std::size_t oom = truth["oom_event"]["index"].get<std::size_t>();
  const auto rows = segment_map_at_event(after, 0, oom);
  std::uint64_t reserved = 0, largest = 0, free_bytes = 0;
  for (const auto& row : rows) {
    reserved += row.total_size;
    largest = std::max(largest, row.largest_free);
    free_bytes += row.free_bytes;
    std::uint64_t covered = 0;
    for (const auto& run : row.runs) {
      EXPECT_EQ(run.offset, covered);
      covered += run.size;
    }
    EXPECT_EQ(covered, row.total_size);
  }
  const auto& at_oom = truth["at_oom"];
  EXPECT_EQ(rows.size(), at_oom["segments"].get<std::size_t>());
  EXPECT_EQ(reserved, at_oom["total_reserved"].get<std::uint64_t>());
  // Unsplit remainders (< 1 MiB each) may show as free: the largest hole is exact to 1 MiB.
  EXPECT_NEAR(static_cast<double>(largest), at_oom["largest_free_block"].get<double>(), 1 << 20);
  EXPECT_LE(free_bytes, at_oom["free_external"].get<std::uint64_t>() + rows.size() * (1u << 20));
  EXPECT_GE(free_bytes + (64u << 20), at_oom["free_external"].get<std::uint64_t>());
}

TEST(SegmentMapAtEvent, AtTheLastEventIsTheSnapshotItself) {
  const auto snap = snapshot::read_snapshot_file((fixtures_dir() / "fid_default" / "snapshot.pickle.zst").string());
  const auto rows = segment_map_at_event(snap, 0, snap.trace(0).size() - 1);
  const auto expected = metrics::build_segment_map(snap, 0);
  ASSERT_EQ(rows.size(), expected.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].address, expected[i].address);
    EXPECT_EQ(rows[i].free_bytes, expected[i].free_bytes);
    EXPECT_EQ(rows[i].largest_free, expected[i].largest_free);
  }
}

}  // namespace
}  // namespace fragscope::diagnose
