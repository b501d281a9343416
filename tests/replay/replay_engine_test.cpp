// The replay loop on small hand-built traces: cache flushes under any config, OOMs the caller
// caught, and the OOM the run died of.
#include "replay/replay_engine.h"

#include <gtest/gtest.h>

#include "alloc/alloc_config.h"

namespace fragscope::replay {
namespace {

using snapshot::TraceAction;
constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kBase = 0x7f0000000000;

snapshot::TraceEvent event(TraceAction action, std::uint64_t addr, std::uint64_t size) {
  snapshot::TraceEvent e;
  e.action = action;
  e.addr = addr;
  e.size = size;
  return e;
}

PreparedTrace prepare(snapshot::TraceEventList trace) {
  snapshot::Snapshot s;
  s.device_traces.push_back(std::move(trace));
  return prepare_trace(s, 0, "t");
}

ReplayOptions at(std::optional<std::uint64_t> capacity) {
  ReplayOptions options;
  options.capacity = capacity;
  options.self_check = true;
  return options;
}

/// 20 MiB held; a 30 MiB request fails and is caught; the run frees, allocates 10 MiB and dies
/// asking for 40 MiB more.
PreparedTrace caught_then_fatal() {
  return prepare({event(TraceAction::kSegmentAlloc, kBase, 20 * kMiB),
                  event(TraceAction::kAlloc, kBase, 20 * kMiB),
                  event(TraceAction::kOom, 10 * kMiB, 30 * kMiB),
                  event(TraceAction::kFreeRequested, kBase, 20 * kMiB),
                  event(TraceAction::kFreeCompleted, kBase, 20 * kMiB),
                  event(TraceAction::kAlloc, kBase, 10 * kMiB),
                  event(TraceAction::kOom, 10 * kMiB, 40 * kMiB),
                  event(TraceAction::kFreeRequested, kBase, 10 * kMiB),
                  event(TraceAction::kFreeCompleted, kBase, 10 * kMiB)});
}

TEST(ReplayEngineTest, ACaughtOomIsNoEndTheLastOneIs) {
  const PreparedTrace trace = caught_then_fatal();
  const ReplayResult r = run_replay(trace, ModelKind::kCaching, trace.recorded_config, at(30 * kMiB));
  EXPECT_EQ(r.caught_ooms, 1u);
  EXPECT_EQ(r.served_caught_ooms, 0u);
  ASSERT_TRUE(r.oom);
  EXPECT_EQ(*r.oom_trace_index, 6u);  // the fatal one
  EXPECT_TRUE(r.oom_matches_recorded);
  EXPECT_TRUE(r.completed);
  EXPECT_EQ(r.stats.num_ooms, 2u);
  EXPECT_EQ(r.segment_mismatches, 0u);
}

TEST(ReplayEngineTest, AConfigThatServesACaughtOomFreesTheBlockAndGoesOn) {
  const PreparedTrace trace = caught_then_fatal();
  const ReplayResult r = run_replay(trace, ModelKind::kCaching, trace.recorded_config, at(55 * kMiB));
  EXPECT_EQ(r.caught_ooms, 0u);
  EXPECT_EQ(r.served_caught_ooms, 1u);
  EXPECT_EQ(r.stats.peak_reserved_bytes, 50 * kMiB);  // 20 held + 30 served, then cached
  ASSERT_TRUE(r.oom);  // the 30 MiB segment is released for the 40 MiB: 60 MiB do not fit
  EXPECT_EQ(*r.oom_trace_index, 6u);
  EXPECT_TRUE(r.oom_matches_recorded);
  EXPECT_TRUE(r.completed);
  // With room for the fatal request too, the replay passes the point where the run died.
  const ReplayResult roomy = run_replay(trace, ModelKind::kCaching, trace.recorded_config, at(60 * kMiB));
  EXPECT_TRUE(roomy.passed_recorded_oom);
  EXPECT_FALSE(roomy.oom);
  EXPECT_EQ(roomy.last_trace_index, 6u);
}

TEST(ReplayEngineTest, AFlushReleasesWhatTheReplayedConfigHolds) {
  // Recorded under the defaults: 8 MiB in a 20 MiB segment, 14 MiB in a segment of its own,
  // freed; empty_cache() releases that one (the first is split and in use); 8 MiB more.
  const PreparedTrace trace = prepare({event(TraceAction::kSegmentAlloc, kBase, 20 * kMiB),
                                       event(TraceAction::kAlloc, kBase, 8 * kMiB),
                                       event(TraceAction::kSegmentAlloc, kBase + 64 * kMiB, 14 * kMiB),
                                       event(TraceAction::kAlloc, kBase + 64 * kMiB, 14 * kMiB),
                                       event(TraceAction::kFreeRequested, kBase + 64 * kMiB, 14 * kMiB),
                                       event(TraceAction::kFreeCompleted, kBase + 64 * kMiB, 14 * kMiB),
                                       event(TraceAction::kSegmentFree, kBase + 64 * kMiB, 14 * kMiB),
                                       event(TraceAction::kAlloc, kBase + 8 * kMiB, 8 * kMiB)});
  ASSERT_EQ(trace.flushes, 1u);
  const ReplayResult recorded = run_replay(trace, ModelKind::kCaching, trace.recorded_config, at(std::nullopt));
  EXPECT_EQ(recorded.segment_mismatches, 0u);
  EXPECT_EQ(recorded.stats.peak_reserved_bytes, 34 * kMiB);
  EXPECT_EQ(recorded.stats.reserved_bytes, 20 * kMiB);
  // Under expandable segments the 14 MiB grow the one mapped range to two 20 MiB pages; the
  // flush unmaps the page that is wholly free, not the segment the recording released.
  ReplayOptions options = at(std::nullopt);
  options.self_check = false;
  const ReplayResult expandable =
      run_replay(trace, ModelKind::kCaching, alloc::parse_alloc_conf("expandable_segments:True"), options);
  EXPECT_EQ(expandable.stats.peak_reserved_bytes, 40 * kMiB);
  EXPECT_EQ(expandable.stats.num_device_free, 1u);
  EXPECT_EQ(expandable.stats.reserved_bytes, 20 * kMiB);
  EXPECT_TRUE(expandable.completed);
}

}  // namespace
}  // namespace fragscope::replay
