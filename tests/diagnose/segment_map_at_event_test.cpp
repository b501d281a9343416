// The segment map at the OOM, checked against the OOM observer's own snapshot (truth.json's
// at_oom) and, at the last event, against the end-state segment map.
#include "diagnose/segment_map_at_event.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "../fixture_support.h"
#include "metrics/segment_map.h"
#include "snapshot/snapshot_reader.h"

namespace fragscope::diagnose {
namespace {

using fragscope::testing::fixtures_dir;
using fragscope::testing::read_json;

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
