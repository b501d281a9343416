// The trace summary: counts per action, time span, OOM entries and the reserved-bytes walk.
// On every recorded snapshot the walk, anchored at the end-state reserved bytes, must give the
// peak PyTorch itself reported (memory_stats' reserved_bytes.all.peak) and, at the OOM, what the
// OOM message and the OOM observer's snapshot say was reserved.
#include "metrics/trace_summary.h"

#include <cmath>
#include <regex>

#include <gtest/gtest.h>

#include "../fixture_snapshots.h"
#include "../hand_built_snapshot.h"
#include "util/bytes.h"

namespace fragscope::metrics {
namespace {

using snapshot::TraceAction;
using testing::EndStateFixture;
using testing::HandBuiltSnapshot;

TEST(TraceSummary, CountsEveryActionUnderItsSnapshotSpelling) {
  HandBuiltSnapshot h;
  h.event(0, TraceAction::kSegmentAlloc, 0x1000, 2 << 20)
      .event(0, TraceAction::kAlloc, 0x1000, 512)
      .unknown_event(0, "future_action")
      .unknown_event(0, "future_action")
      .unknown_event(0, "another_one")
      .event(0, TraceAction::kFreeRequested, 0x1000, 512)
      .event(0, TraceAction::kFreeCompleted, 0x1000, 512);
  const TraceSummary s = summarize_trace(h.snap, 0);
  EXPECT_EQ(s.entries, 7u);
  const std::map<std::string, std::uint64_t> expected = {{"segment_alloc", 1},  {"alloc", 1},
                                                         {"future_action", 2},  {"another_one", 1},
                                                         {"free_requested", 1}, {"free_completed", 1}};
  EXPECT_EQ(s.actions, expected);  // no "other" bucket: unknown actions keep their own names
}

TEST(TraceSummary, ReservedWalkFollowsSegmentEventsOfBothKinds) {
  HandBuiltSnapshot h;
  h.event(0, TraceAction::kSegmentAlloc, 0x1000, 20 << 20)
      .event(0, TraceAction::kSegmentMap, 0x9000, 4 << 20)      // expandable: pages mapped
      .event(0, TraceAction::kSegmentFree, 0x1000, 20 << 20)
      .event(0, TraceAction::kOom, 1 << 20, 64 << 20)           // addr holds the driver's free bytes
      .event(0, TraceAction::kSegmentMap, 0x9000, 2 << 20)
      .event(0, TraceAction::kSegmentUnmap, 0x9000, 6 << 20)
      .event(0, TraceAction::kOom, 3 << 20, 96 << 20);
  const TraceSummary s = summarize_trace(h.snap, 0);
  EXPECT_EQ(s.peak_reserved_rise, 24 << 20);
  EXPECT_EQ(s.net_reserved_change, 0);
  ASSERT_EQ(s.ooms.size(), 2u);
  EXPECT_EQ(s.ooms[0].index, 3u);
  EXPECT_EQ(s.ooms[0].request_bytes, 64u << 20);
  EXPECT_EQ(s.ooms[0].device_free_bytes, 1u << 20);
  EXPECT_EQ(s.ooms[1].index, 6u);
  EXPECT_EQ(s.ooms[1].device_free_bytes, 3u << 20);
  ASSERT_EQ(s.reserved_rise_at_oom.size(), 2u);
  EXPECT_EQ(s.reserved_rise_at_oom[0], 4 << 20);
  EXPECT_EQ(s.reserved_rise_at_oom[1], 0);
}

TEST(TraceSummary, TraceStartingWithFreesFallsBelowItsStartButPeaksAtZero) {
  // A ring buffer that wrapped begins mid-run: releases of segments reserved before it.
  HandBuiltSnapshot h;
  h.event(0, TraceAction::kSegmentFree, 0x1000, 8 << 20).event(0, TraceAction::kSegmentFree, 0x3000, 2 << 20);
  const TraceSummary s = summarize_trace(h.snap, 0);
  EXPECT_EQ(s.net_reserved_change, -(10 << 20));
  EXPECT_EQ(s.peak_reserved_rise, 0);
}

TEST(TraceSummary, TimeSpanIgnoresUnrecordedTimesAndOrder) {
  HandBuiltSnapshot h;
  h.event(0, TraceAction::kAlloc, 1, 512, 0)
      .event(0, TraceAction::kAlloc, 2, 512, 5'000'000)
      .event(0, TraceAction::kAlloc, 3, 512, 4'000'000)  // clocks of two threads interleave
      .event(0, TraceAction::kAlloc, 4, 512, 9'000'000)
      .event(0, TraceAction::kAlloc, 5, 512, 0);
  const TraceSummary s = summarize_trace(h.snap, 0);
  EXPECT_EQ(s.first_time_us, 4'000'000);
  EXPECT_EQ(s.last_time_us, 9'000'000);
}

TEST(TraceSummary, DeviceWithoutTraceIsEmpty) {
  HandBuiltSnapshot h;
  h.event(1, TraceAction::kAlloc, 1, 512, 7);
  for (int device : {0, 2, -1}) {
    const TraceSummary s = summarize_trace(h.snap, device);
    EXPECT_EQ(s.entries, 0u) << device;
    EXPECT_TRUE(s.actions.empty()) << device;
    EXPECT_TRUE(s.ooms.empty()) << device;
    EXPECT_EQ(s.first_time_us, 0) << device;
    EXPECT_EQ(s.peak_reserved_rise, 0) << device;
  }
  EXPECT_EQ(summarize_trace(h.snap, 1).entries, 1u);
}

class RecordedTrace : public ::testing::TestWithParam<EndStateFixture> {};

TEST_P(RecordedTrace, CountsEqualTruth) {
  const auto& f = GetParam();
  const TraceSummary s = summarize_trace(f.read(), 0);
  EXPECT_EQ(s.entries, f.truth["trace_entries"].get<std::size_t>());
  EXPECT_EQ(s.actions, (f.truth["trace_actions"].get<std::map<std::string, std::uint64_t>>()));
  EXPECT_GT(s.first_time_us, 0);
  EXPECT_GT(s.last_time_us, s.first_time_us);
}

TEST_P(RecordedTrace, ReservedWalkGivesPyTorchsPeakAndStart) {
  const auto& f = GetParam();
  const TraceSummary s = summarize_trace(f.read(), 0);
  const auto end_reserved = f.stats.at("reserved_bytes.all.current").get<std::int64_t>();
  const std::int64_t start = end_reserved - s.net_reserved_change;
  EXPECT_EQ(start, f.truth["reserved_at_trace_start"].get<std::int64_t>());
  // Peaks were reset when recording began, so PyTorch's peak is the peak of the trace window.
  EXPECT_EQ(start + s.peak_reserved_rise, f.stats.at("reserved_bytes.all.peak").get<std::int64_t>());
}

/// "X GiB is allocated by PyTorch, and Y GiB is reserved by PyTorch but unallocated": X + Y.
std::optional<double> reserved_gib_in_message(const std::string& message) {
  static const std::regex pattern(R"(([0-9.]+) GiB is allocated by PyTorch, and ([0-9.]+) GiB is reserved)");
  std::smatch m;
  if (!std::regex_search(message, m, pattern)) return std::nullopt;
  return std::stod(m[1]) + std::stod(m[2]);
}

class RecordedOom : public ::testing::TestWithParam<EndStateFixture> {};

TEST_P(RecordedOom, ReservedAtTheOomMatchesTheOomMessage) {
  const auto& f = GetParam();
  const TraceSummary s = summarize_trace(f.read(), 0);
  ASSERT_EQ(s.ooms.size(), 1u);
  EXPECT_EQ(s.ooms[0].index, f.truth["oom_event"]["index"].get<std::size_t>());
  EXPECT_EQ(s.ooms[0].request_bytes, f.truth["oom_event"]["size"].get<std::uint64_t>());
  EXPECT_EQ(s.ooms[0].device_free_bytes, f.truth["oom_event"]["device_free"].get<std::uint64_t>());
  const std::int64_t reserved = f.truth["reserved_at_trace_start"].get<std::int64_t>() + s.reserved_rise_at_oom[0];
  const auto meta = testing::read_json(f.snapshot.parent_path() / "meta.json");
  const auto from_message = reserved_gib_in_message(meta.at("oom_message").get<std::string>());
  ASSERT_TRUE(from_message.has_value());
  // Two figures rounded to 0.01 GiB each.
  EXPECT_NEAR(static_cast<double>(reserved) / static_cast<double>(kGiB), *from_message, 0.0101) << f.name;
  if (f.truth.contains("at_oom") && !f.truth["at_oom"].is_null()) {
    // The OOM observer's snapshot was taken at that moment: exact.
    EXPECT_EQ(reserved, f.truth["at_oom"]["total_reserved"].get<std::int64_t>());
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RecordedTrace, ::testing::ValuesIn(testing::end_state_fixtures()),
                         testing::fixture_name);
INSTANTIATE_TEST_SUITE_P(Fixtures, RecordedOom, ::testing::ValuesIn(testing::oom_fixtures()), testing::fixture_name);

}  // namespace
}  // namespace fragscope::metrics
