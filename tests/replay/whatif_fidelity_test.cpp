// What-if fidelity: one run's trace replayed under another config must land where the real run
// under that config landed (the fixtures recorded the same requests under several configs).

#include <cmath>

#include <gtest/gtest.h>

#include "alloc/alloc_config.h"
#include "fixture_util.h"
#include "replay/capacity.h"
#include "replay/replay_engine.h"
#include "snapshot/snapshot_reader.h"

namespace fragscope::replay {
namespace {

using testing::prepare_fixture;
using testing::read_truth;

double relative_error(std::uint64_t predicted, std::uint64_t real) {
  return std::abs(static_cast<double>(predicted) - static_cast<double>(real)) /
         static_cast<double>(real);
}

ReplayResult replay_under(const PreparedTrace& trace, const std::string& conf,
                          bool recorded_addresses) {
  const Capacity capacity = resolve_capacity(trace, {});
  ReplayOptions options;
  options.capacity = capacity.bytes;
  options.use_recorded_addresses = recorded_addresses;
  return run_replay(trace, ModelKind::kCaching, alloc::parse_alloc_conf(conf), options);
}

class WhatIfFidelityTest : public ::testing::TestWithParam<bool> {};

TEST_P(WhatIfFidelityTest, DefaultRunPredictsExpandableSegments) {
  const PreparedTrace trace = prepare_fixture("fid_default");
  const auto real = read_truth("fid_expandable")["max_memory_reserved"].get<std::uint64_t>();
  const ReplayResult r = replay_under(trace, "expandable_segments:True", GetParam());
  EXPECT_LT(relative_error(r.stats.peak_reserved_bytes, real), 0.02);
  EXPECT_EQ(r.stats.peak_reserved_bytes, real);  // in fact exact
}

TEST_P(WhatIfFidelityTest, DefaultRunPredictsMaxSplitSize128) {
  const PreparedTrace trace = prepare_fixture("fid_default");
  const auto real = read_truth("fid_msplit128")["max_memory_reserved"].get<std::uint64_t>();
  const ReplayResult r = replay_under(trace, "max_split_size_mb:128", GetParam());
  EXPECT_LT(relative_error(r.stats.peak_reserved_bytes, real), 0.02);
  EXPECT_EQ(r.stats.peak_reserved_bytes, real);
}

TEST_P(WhatIfFidelityTest, FragmentationOomIsSavedByExpandableSegments) {
  const PreparedTrace trace = prepare_fixture("frag_oom_104");
  const ReplayResult r = replay_under(trace, "expandable_segments:True", GetParam());
  EXPECT_FALSE(r.oom);
  EXPECT_TRUE(r.passed_recorded_oom);
  ASSERT_EQ(trace.ooms.size(), 1u);
  EXPECT_EQ(r.last_trace_index, trace.ooms[0].trace_index);

  // The real expandable run's peak up to the same request: the malloc after as many allocs
  // as the default run made before its OOM.
  const std::uint32_t oom_index = trace.ooms[0].trace_index;
  const snapshot::Snapshot other = snapshot::read_snapshot_file(
      testing::fixture_path("frag_oom_104"));
  std::size_t allocs_before = 0;
  for (std::uint32_t i = 0; i < oom_index; ++i) {
    allocs_before += other.device_traces[0][i].action == snapshot::TraceAction::kAlloc;
  }
  const snapshot::Snapshot expandable =
      snapshot::read_snapshot_file(testing::fixture_path("frag_expandable_104"));
  std::uint64_t reserved = read_truth("frag_expandable_104")["reserved_at_trace_start"].get<std::uint64_t>();
  std::uint64_t peak = reserved;
  std::size_t allocs = 0;
  for (const snapshot::TraceEvent& e : expandable.device_traces[0]) {
    using snapshot::TraceAction;
    if (e.action == TraceAction::kSegmentMap || e.action == TraceAction::kSegmentAlloc) reserved += e.size;
    if (e.action == TraceAction::kSegmentUnmap || e.action == TraceAction::kSegmentFree) reserved -= e.size;
    peak = std::max(peak, reserved);
    if (e.action == TraceAction::kAlloc && ++allocs == allocs_before + 1) break;
  }
  EXPECT_LT(relative_error(r.stats.peak_reserved_bytes, peak), 0.02);
  EXPECT_EQ(r.stats.peak_reserved_bytes, peak);
}

// With the real driver's addresses, and with addresses of our own (what-if configs get no
// recorded addresses that fit): both must hold.
INSTANTIATE_TEST_SUITE_P(Addresses, WhatIfFidelityTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "recorded" : "fresh"; });

}  // namespace
}  // namespace fragscope::replay
