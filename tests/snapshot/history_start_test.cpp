// How a trace begins, told by the blocks live at the dump that are older than it: hand-built cases for each kind,
// and recordings whose history began at the allocator's start, after the model was built, and in a wrapped ring.
#include "snapshot/history_start.h"

#include <string>

#include <gtest/gtest.h>

#include "../hand_built_snapshot.h"
#include "snapshot/snapshot_reader.h"

namespace fragscope::snapshot {
namespace {

using testing::HandBuiltSnapshot;
using testing::hole;
using testing::live;

constexpr std::uint64_t kBase = 0x7f0000000000;

StackId some_stack(HandBuiltSnapshot& h) { return h.stack({{"train.py", 12, "<module>"}}); }

TEST(HistoryStart, EveryLiveBlockAllocatedInTheTraceIsTheAllocatorsStart) {
  HandBuiltSnapshot h;
  const StackId frames = some_stack(h);
  h.segment(kBase, {live(1024, 1000, frames), hole(1024)});
  h.event(0, TraceAction::kAlloc, kBase, 1000).event(0, TraceAction::kAlloc, kBase + 1024, 1000);
  h.event(0, TraceAction::kFreeCompleted, kBase + 1024, 1000);
  EXPECT_EQ(history_start(h.snap, 0), HistoryStart::kAllocatorStart);
}

TEST(HistoryStart, TheOlderBlocksAreTheLiveOnesNoAllocOfTheTraceHandsOut) {
  HandBuiltSnapshot h;
  h.segment(kBase, {live(1024, 1000), hole(1024), live(1024, 1000, some_stack(h))});
  h.event(0, TraceAction::kAlloc, kBase + 2048, 1000).event(0, TraceAction::kAlloc, kBase + 1024, 1000);
  h.event(0, TraceAction::kFreeCompleted, kBase + 1024, 1000);
  const std::vector<const Block*> older = blocks_older_than_trace(h.snap, 0);
  ASSERT_EQ(older.size(), 1u);
  EXPECT_EQ(older.front()->address, kBase);
  EXPECT_TRUE(blocks_older_than_trace(h.snap, 1).empty());
}

TEST(HistoryStart, OlderBlocksWithoutFramesBeforeATraceWithFramesStartedLate) {
  HandBuiltSnapshot h;
  h.segment(kBase, {live(1024, 1000), live(1024, 1000, some_stack(h))});
  h.event(0, TraceAction::kAlloc, kBase + 1024, 1000);
  h.snap.device_traces[0].back().stack = some_stack(h);
  EXPECT_EQ(history_start(h.snap, 0), HistoryStart::kStartedLate);
}

TEST(HistoryStart, AnOlderBlockWithFramesMeansTheRingWrapped) {
  HandBuiltSnapshot h;
  h.segment(kBase, {live(1024, 1000), live(1024, 1000, some_stack(h)), hole(2048)});
  h.event(0, TraceAction::kAlloc, kBase + 2048, 1000).event(0, TraceAction::kFreeCompleted, kBase + 2048, 1000);
  EXPECT_EQ(history_start(h.snap, 0), HistoryStart::kRingWrapped);
}

TEST(HistoryStart, OlderBlocksWithoutFramesBeforeATraceAFullRingsLengthCannotTell) {
  HandBuiltSnapshot h;
  h.segment(kBase, {live(1024, 1000), hole(1024)});
  const StackId frames = some_stack(h);
  for (std::size_t i = 0; i < kRoundRingEntries / 2; ++i) {
    h.event(0, TraceAction::kAlloc, kBase + 1024, 1000).event(0, TraceAction::kFreeCompleted, kBase + 1024, 1000);
    h.snap.device_traces[0][2 * i].stack = frames;
  }
  EXPECT_EQ(history_start(h.snap, 0), HistoryStart::kUnknown) << "a ring of 1,000 may have wrapped";
  h.event(0, TraceAction::kAlloc, kBase + 1024, 1000);
  h.snap.device_traces[0].back().stack = frames;
  EXPECT_EQ(history_start(h.snap, 0), HistoryStart::kStartedLate);
}

TEST(HistoryStart, NoFramesAnywhereCannotTell) {
  HandBuiltSnapshot h;
  h.segment(kBase, {live(1024, 1000), live(1024, 1000)});
  h.event(0, TraceAction::kAlloc, kBase + 1024, 1000);
  EXPECT_EQ(history_start(h.snap, 0), HistoryStart::kUnknown);
}

TEST(HistoryStart, BlocksOfOtherDevicesAndFreeBlocksDoNotCount) {
  HandBuiltSnapshot h;
  h.segment(kBase, {live(1024, 1000, some_stack(h))}, {.device = 1});
  h.segment(kBase + (1 << 20), {hole(4096)});
  h.event(0, TraceAction::kAlloc, kBase + (1 << 20), 1000).event(0, TraceAction::kFreeCompleted, kBase + (1 << 20), 0);
  EXPECT_EQ(history_start(h.snap, 0), HistoryStart::kAllocatorStart);
  EXPECT_EQ(history_start(h.snap, 1), HistoryStart::kRingWrapped) << "device 1 has no trace: its block is older";
}

HistoryStart of_field_recording(const std::string& name) {
  const Snapshot snap = read_snapshot_file(std::string(FRAGSCOPE_SOURCE_DIR) + "/tests/data/field/" + name +
                                           "/oom_snapshot.pickle.zst");
  return history_start(snap, busiest_device(snap));
}

// u3d_edge records from before the model is built; dps_edge from its train(), after the model and its parameters;
// ring_edge and ppo_edge keep a ring of max_entries shorter than the run; mamba_edge's history began at step 4 and
// its ring of 100,000 filled.
TEST(HistoryStart, RecordingsTellHowTheirHistoryBegan) {
  EXPECT_EQ(of_field_recording("u3d_edge"), HistoryStart::kAllocatorStart);
  EXPECT_EQ(of_field_recording("dps_edge"), HistoryStart::kStartedLate);
  EXPECT_EQ(of_field_recording("ring_edge"), HistoryStart::kRingWrapped);
  EXPECT_EQ(of_field_recording("ppo_edge"), HistoryStart::kRingWrapped);
  EXPECT_EQ(of_field_recording("mamba_edge"), HistoryStart::kUnknown);
}

}  // namespace
}  // namespace fragscope::snapshot
