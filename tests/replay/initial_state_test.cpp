// The allocator's state before the first trace event, walked back from the end state on the
// recordings: a trace cut mid-run (midrun_default: recording started at step 6; ring_default:
// a ring buffer that kept the last steps) starts from what the trace's segment events, replayed
// forward, turn into the snapshot's segments; a recording from the process's start starts with
// nothing live.
#include "replay/initial_state.h"

#include <map>
#include <string>

#include <gtest/gtest.h>

#include "alloc/size_rules.h"
#include "fixture_util.h"
#include "snapshot/snapshot_reader.h"

namespace fragscope::replay {
namespace {

using snapshot::TraceAction;
using testing::fixture_path;

struct Reconstructed {
  snapshot::Snapshot snapshot;
  int device = 0;
  InitialState state;
};

/// The fixture's busiest device walked back; every fixture used here ran with the default settings.
Reconstructed reconstruct(const std::string& scenario) {
  Reconstructed r;
  r.snapshot = snapshot::read_snapshot_file(fixture_path(scenario));
  r.device = snapshot::busiest_device(r.snapshot);
  std::map<std::uint64_t, alloc::StreamId> streams;
  std::map<std::pair<std::int64_t, std::int64_t>, alloc::MemPoolId> pools{{{0, 0}, alloc::kDefaultPool}};
  r.state = reconstruct_initial_state(
      r.snapshot, r.device, r.snapshot.trace(r.device), alloc::AllocConfig{},
      [&](std::uint64_t stream) { return streams.emplace(stream, streams.size()).first->second; },
      [&](std::pair<std::int64_t, std::int64_t> pool) {
        return pools.emplace(pool, static_cast<alloc::MemPoolId>(pools.size())).first->second;
      });
  return r;
}

/// What the device holds at the snapshot: its segments' bytes.
std::uint64_t reserved_at_the_end(const Reconstructed& r) {
  std::uint64_t bytes = 0;
  for (const auto& s : r.snapshot.segments)
    if (s.device == r.device) bytes += s.total_size;
  return bytes;
}

/// Segments in address order, each block inside its segment, blocks in address order, no overlap.
void expect_well_formed(const InitialState& state) {
  std::uint64_t reserved = 0, segment_end = 0;
  for (const alloc::InitialSegment& s : state.segments) {
    EXPECT_GE(s.address, segment_end);
    segment_end = s.address + s.size;
    reserved += s.size;
    std::uint64_t block_end = s.address;
    for (const alloc::InitialBlock& b : s.live_blocks) {
      EXPECT_GE(b.address, block_end);
      block_end = b.address + b.size;
      EXPECT_LE(block_end, segment_end);
      EXPECT_LE(b.requested_size, b.size);
    }
  }
  EXPECT_EQ(reserved, state.reserved);
}

class MidRunRecording : public ::testing::TestWithParam<std::string> {};

TEST_P(MidRunRecording, TheTracesSegmentEventsLeadFromTheStartToTheEndState) {
  const Reconstructed r = reconstruct(GetParam());
  expect_well_formed(r.state);
  EXPECT_EQ(r.state.anomalies, 0u);
  // Replayed forward, the segment events of the trace turn the start into the end state.
  std::int64_t reserved = static_cast<std::int64_t>(r.state.reserved);
  for (const snapshot::TraceEvent& e : r.snapshot.trace(r.device)) {
    if (e.action == TraceAction::kSegmentAlloc || e.action == TraceAction::kSegmentMap)
      reserved += static_cast<std::int64_t>(e.size);
    if (e.action == TraceAction::kSegmentFree || e.action == TraceAction::kSegmentUnmap)
      reserved -= static_cast<std::int64_t>(e.size);
  }
  EXPECT_EQ(reserved, static_cast<std::int64_t>(reserved_at_the_end(r)));
  // The run was well under way: blocks were live before the first event.
  std::size_t live = 0;
  for (const auto& s : r.state.segments) live += s.live_blocks.size();
  EXPECT_GT(live, 0u);
  EXPECT_GT(r.state.reserved, 1ull << 30);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MidRunRecording, ::testing::Values("midrun_default", "ring_default"));

TEST(InitialState, ARecordingFromTheStartBeginsWithNothingLive) {
  const Reconstructed r = reconstruct("fid_default");
  expect_well_formed(r.state);
  for (const auto& s : r.state.segments) EXPECT_TRUE(s.live_blocks.empty()) << s.address;
  EXPECT_LE(r.state.reserved, alloc::kSmallBuffer);  // at most a small segment from before recording
}

}  // namespace
}  // namespace fragscope::replay
