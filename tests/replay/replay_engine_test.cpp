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

/// 20 MiB held; 30 MiB asked inside cuDNN's plan loop (at::native::run_conv_plan: a workspace) and freed; 10 MiB
/// more. Recorded on a device with room for all of it.
PreparedTrace with_workspace() {
  snapshot::Snapshot s;
  s.device_traces.push_back({event(TraceAction::kSegmentAlloc, kBase, 20 * kMiB),
                             event(TraceAction::kAlloc, kBase, 20 * kMiB),
                             event(TraceAction::kSegmentAlloc, kBase + 64 * kMiB, 30 * kMiB),
                             event(TraceAction::kAlloc, kBase + 64 * kMiB, 30 * kMiB),
                             event(TraceAction::kFreeRequested, kBase + 64 * kMiB, 30 * kMiB),
                             event(TraceAction::kFreeCompleted, kBase + 64 * kMiB, 30 * kMiB),
                             event(TraceAction::kSegmentAlloc, kBase + 128 * kMiB, 10 * kMiB),
                             event(TraceAction::kAlloc, kBase + 128 * kMiB, 10 * kMiB)});
  const snapshot::FrameId plan = s.stacks.intern_frame(
      {s.strings.intern(""), s.strings.intern("at::native::run_conv_plan(cudnnContext*, at::Tensor const&)"), 0});
  s.device_traces[0][3].stack = s.stacks.intern_stack(std::vector<snapshot::FrameId>{plan});
  return prepare_trace(s, 0, "t");
}

// ATen catches a refused workspace and runs a plan that asks for less: a replay may serve it as recorded (an OOM
// like any other), refuse it where it does not fit and go on, or leave it out (the floor without workspaces).
TEST(ReplayEngineTest, AWorkspaceThatDoesNotFitIsAnOomOrRefusedOrLeftOut) {
  const PreparedTrace trace = with_workspace();
  ASSERT_TRUE(has_elastic_allocs(trace));
  ReplayOptions options = at(40 * kMiB);
  options.self_check = false;
  const ReplayResult served = run_replay(trace, ModelKind::kCaching, trace.recorded_config, options);
  ASSERT_TRUE(served.oom);
  EXPECT_EQ(*served.oom_trace_index, 3u);
  EXPECT_EQ(served.refused_elastic, 0u);

  options.elastic = ElasticAllocs::kRefuseWhenFull;
  const ReplayResult refused = run_replay(trace, ModelKind::kCaching, trace.recorded_config, options);
  EXPECT_FALSE(refused.oom);
  EXPECT_TRUE(refused.completed);
  EXPECT_EQ(refused.refused_elastic, 1u);
  EXPECT_EQ(refused.stats.peak_reserved_bytes, 30 * kMiB);  // 20 held + the 10 after it
  // Where it fits, it is served as recorded.
  options.capacity = 60 * kMiB;
  const ReplayResult roomy = run_replay(trace, ModelKind::kCaching, trace.recorded_config, options);
  EXPECT_EQ(roomy.refused_elastic, 0u);
  EXPECT_EQ(roomy.stats.peak_reserved_bytes, 50 * kMiB);  // the 10 MiB split from the cached workspace

  ReplayOptions floor = at(std::nullopt);
  floor.self_check = false;
  EXPECT_EQ(run_replay(trace, ModelKind::kIdeal, trace.recorded_config, floor).stats.peak_reserved_bytes, 50 * kMiB);
  floor.elastic = ElasticAllocs::kSkip;
  const ReplayResult without = run_replay(trace, ModelKind::kIdeal, trace.recorded_config, floor);
  EXPECT_EQ(without.stats.peak_reserved_bytes, 30 * kMiB);
  EXPECT_EQ(without.refused_elastic, 1u);
}

}  // namespace
}  // namespace fragscope::replay
