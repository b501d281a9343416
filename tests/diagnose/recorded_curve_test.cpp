// The recorded curve, checked against truth.json's exact totals (end state, trace-window peak).
#include "diagnose/recorded_curve.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "../fixture_support.h"
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
    EXPECT_EQ(points.back().reserved,
              *std::max_element(curve.reserved.end() - static_cast<std::ptrdiff_t>(curve.reserved.size() / 100) - 1,
                                curve.reserved.end()));
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

}  // namespace
}  // namespace fragscope::diagnose
