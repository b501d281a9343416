// Trace actions: every spelling PyTorch writes parses to its action and back; unknown ones,
// and the "other" bucket's own name, do not parse.
#include "snapshot/trace_action.h"

#include <gtest/gtest.h>

#include "../fixture_support.h"

namespace fragscope::snapshot {
namespace {

TEST(TraceAction, EveryKnownActionRoundTrips) {
  for (std::size_t i = 0; i + 1 < kTraceActionCount; ++i) {
    const auto action = static_cast<TraceAction>(i);
    const auto parsed = parse_trace_action(to_string(action));
    ASSERT_TRUE(parsed.has_value()) << to_string(action);
    EXPECT_EQ(*parsed, action);
  }
  EXPECT_EQ(to_string(TraceAction::kOom), "oom");
  EXPECT_EQ(to_string(TraceAction::kSegmentMap), "segment_map");
  EXPECT_EQ(to_string(TraceAction::kFreeCompleted), "free_completed");
}

TEST(TraceAction, UnknownSpellingsDoNotParse) {
  for (const char* name : {"other", "", "Alloc", "alloc ", "segment-alloc", "oom\n"})
    EXPECT_FALSE(parse_trace_action(name).has_value()) << name;
}

TEST(TraceAction, EveryActionInTheRecordingsIsKnown) {
  for (const auto& f : testing::snapshot_fixtures())
    for (const auto& [name, count] : f.truth["trace_actions"].items())
      EXPECT_TRUE(parse_trace_action(name).has_value()) << f.name << ": " << name;
}

}  // namespace
}  // namespace fragscope::snapshot
