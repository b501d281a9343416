// Every recorded snapshot, read and measured, must equal its truth.json exactly (the segsum
// arithmetic of torch.cuda._memory_viz), byte for byte.
#include <gtest/gtest.h>

#include "../fixture_support.h"
#include "metrics/snapshot_analysis.h"
#include "snapshot/snapshot_reader.h"

namespace fragscope {
namespace {

using testing::SnapshotFixture;

class SnapshotTruth : public ::testing::TestWithParam<SnapshotFixture> {};

TEST_P(SnapshotTruth, TotalsEqualTruthExactly) {
  const auto& f = GetParam();
  const auto snap = snapshot::read_snapshot_file(f.snapshot.string());
  const auto a = metrics::analyze_snapshot(snap, 0);
  const auto& t = f.truth;
  EXPECT_EQ(a.totals.segments, t["segments"].get<std::uint64_t>());
  EXPECT_EQ(a.totals.blocks, t["blocks"].get<std::uint64_t>());
  EXPECT_EQ(a.totals.reserved_bytes, t["total_reserved"].get<std::uint64_t>());
  EXPECT_EQ(a.totals.requested_bytes, t["total_allocated"].get<std::uint64_t>());
  EXPECT_EQ(a.totals.free_internal_bytes, t["free_internal"].get<std::uint64_t>());
  EXPECT_EQ(a.totals.free_external_bytes, t["free_external"].get<std::uint64_t>());
  EXPECT_EQ(a.totals.largest_free_block, t["largest_free_block"].get<std::uint64_t>());
  EXPECT_EQ(a.trace.entries, t["trace_entries"].get<std::uint64_t>());
  std::map<std::string, std::uint64_t> actions = t["trace_actions"];
  EXPECT_EQ(a.trace.actions, actions);
  // segsum's identity: every reserved byte is requested, rounding or free.
  EXPECT_EQ(a.totals.requested_bytes + a.totals.free_internal_bytes + a.totals.free_external_bytes,
            a.totals.reserved_bytes);
}

TEST_P(SnapshotTruth, TraceWindowReservedMatchesTruth) {
  const auto& f = GetParam();
  if (!f.truth.contains("reserved_at_trace_start")) GTEST_SKIP() << "no trace-window truth for " << f.name;
  const auto snap = snapshot::read_snapshot_file(f.snapshot.string());
  const auto a = metrics::analyze_snapshot(snap, 0);
  EXPECT_EQ(a.reserved_at_trace_start, f.truth["reserved_at_trace_start"].get<std::int64_t>());
  EXPECT_EQ(a.trace_peak_reserved, f.truth["trace_window_peak_reserved"].get<std::int64_t>());
}

TEST_P(SnapshotTruth, OomEventMatchesTruth) {
  const auto& f = GetParam();
  const auto snap = snapshot::read_snapshot_file(f.snapshot.string());
  const auto a = metrics::analyze_snapshot(snap, 0);
  if (!f.scenario_truth.contains("oom_event") || f.scenario_truth["oom_event"].is_null()) {
    EXPECT_TRUE(a.trace.ooms.empty());
    return;
  }
  const auto& oom = f.scenario_truth["oom_event"];
  ASSERT_EQ(a.trace.ooms.size(), 1u);
  EXPECT_EQ(a.trace.ooms[0].index, oom["index"].get<std::size_t>());
  EXPECT_EQ(a.trace.ooms[0].request_bytes, oom["size"].get<std::uint64_t>());
  EXPECT_EQ(a.trace.ooms[0].device_free_bytes, oom["device_free"].get<std::uint64_t>());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SnapshotTruth, ::testing::ValuesIn(testing::snapshot_fixtures()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace fragscope
