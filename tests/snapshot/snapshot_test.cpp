// The snapshot model's own queries: a device's trace, an event's action name, the busiest
// device and the last OOM entry; on the recordings, the OOM index is truth.json's.
#include "snapshot/snapshot.h"

#include <string>

#include <gtest/gtest.h>

#include "../fixture_snapshots.h"
#include "../hand_built_snapshot.h"

namespace fragscope::snapshot {
namespace {

using testing::HandBuiltSnapshot;

TEST(Snapshot, TraceOfADeviceWithoutOneIsEmpty) {
  HandBuiltSnapshot h;
  h.event(1, TraceAction::kAlloc, 1, 512);
  EXPECT_EQ(h.snap.trace(1).size(), 1u);
  EXPECT_TRUE(h.snap.trace(0).empty());
  EXPECT_TRUE(h.snap.trace(2).empty());
  EXPECT_TRUE(h.snap.trace(-1).empty());
}

TEST(Snapshot, ActionNameKeepsTheSpellingOfUnknownActions) {
  HandBuiltSnapshot h;
  h.event(0, TraceAction::kSegmentUnmap, 1, 512).unknown_event(0, "segment_remap");
  EXPECT_EQ(h.snap.action_name(h.snap.trace(0)[0]), "segment_unmap");
  EXPECT_EQ(h.snap.action_name(h.snap.trace(0)[1]), "segment_remap");
}

TEST(Snapshot, BusiestDeviceHasTheMostEventsFirstOnATie) {
  HandBuiltSnapshot h;
  EXPECT_EQ(busiest_device(h.snap), 0) << "no trace at all";
  h.event(1, TraceAction::kAlloc, 1, 512).event(3, TraceAction::kAlloc, 1, 512).event(3, TraceAction::kAlloc, 2, 512);
  EXPECT_EQ(busiest_device(h.snap), 3);
  h.event(1, TraceAction::kAlloc, 2, 512);
  EXPECT_EQ(busiest_device(h.snap), 1) << "a tie goes to the lower ordinal";
}

TEST(Snapshot, LastOomIndexIsTheLastOomEntry) {
  HandBuiltSnapshot h;
  h.event(0, TraceAction::kOom, 0, 512).event(0, TraceAction::kAlloc, 1, 512).event(0, TraceAction::kOom, 0, 512);
  h.event(0, TraceAction::kFreeRequested, 1, 512);
  EXPECT_EQ(last_oom_index(h.snap, 0), 2u);
  EXPECT_EQ(last_oom_index(h.snap, 1), std::nullopt);
  h.event(1, TraceAction::kAlloc, 1, 512);
  EXPECT_EQ(last_oom_index(h.snap, 1), std::nullopt);
}

// eval_spike records torch.optim's Optimizer.step ranges: each annotation's stage and name are
// its fields', decoded once when the snapshot was read, and every range that opened closed.
TEST(Snapshot, RecordedAnnotationsAreDecodedWhenRead) {
  const Snapshot& snap = testing::fixture_snapshot(testing::fixtures_dir() / "eval_spike" / "snapshot.pickle.zst");
  std::size_t starts = 0, ends = 0;
  for (const Annotation& a : snap.annotations) {
    std::string stage, name;
    for (const auto& [key, value] : a.fields) {
      if (snap.strings.view(key) == "stage") stage = snap.strings.view(value);
      if (snap.strings.view(key) == "name") name = snap.strings.view(value);
    }
    EXPECT_EQ(snap.strings.view(a.name), name);
    EXPECT_EQ(a.stage, stage == "START" ? AnnotationStage::kStart
                       : stage == "END" ? AnnotationStage::kEnd
                                        : AnnotationStage::kOther);
    if (!name.starts_with("Optimizer.step")) continue;
    starts += a.stage == AnnotationStage::kStart;
    ends += a.stage == AnnotationStage::kEnd;
  }
  EXPECT_GT(starts, 0u);
  EXPECT_EQ(starts, ends);
}

class RecordedSnapshot : public ::testing::TestWithParam<testing::EndStateFixture> {};

TEST_P(RecordedSnapshot, OomIndexAndDeviceAreTruths) {
  const auto& f = GetParam();
  const Snapshot& snap = f.read();
  EXPECT_EQ(busiest_device(snap), 0);  // one H200
  EXPECT_EQ(snap.trace(0).size(), f.truth["trace_entries"].get<std::size_t>());
  if (f.oom()) {
    EXPECT_EQ(last_oom_index(snap, 0), f.truth["oom_event"]["index"].get<std::size_t>());
  } else {
    EXPECT_EQ(last_oom_index(snap, 0), std::nullopt);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RecordedSnapshot, ::testing::ValuesIn(testing::end_state_fixtures()),
                         testing::fixture_name);

}  // namespace
}  // namespace fragscope::snapshot
