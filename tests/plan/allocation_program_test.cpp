#include "plan/allocation_program.h"

#include <stdexcept>

#include <gtest/gtest.h>

namespace fragscope::plan {
namespace {

TEST(AllocationProgram, TheTapeRecordsEventsAndMarksInOrder) {
  AllocationTape tape;
  tape.mark(Phase::kForward, 0);
  const auto a = tape.alloc(1000, MemoryRole::kActivations);
  const auto b = tape.alloc(2000, MemoryRole::kTransients, 1);
  tape.free(b);
  tape.retag(a, MemoryRole::kGradients);
  tape.mark(Phase::kBackward, 0);
  tape.free(AllocationTape::kNone);  // an optional tensor that does not exist
  EXPECT_TRUE(tape.live(a));
  EXPECT_FALSE(tape.live(b));
  EXPECT_EQ(tape.bytes(b), 2000u);
  const AllocationProgram p = tape.take();
  ASSERT_EQ(p.events.size(), 4u);
  EXPECT_EQ(p.tensors, 2u);
  EXPECT_EQ(p.events[1].stream, 1);
  EXPECT_EQ(p.events[2].kind, ProgramEvent::Kind::kFree);
  EXPECT_EQ(p.events[2].bytes, 2000u);  // a free carries its tensor's size
  EXPECT_EQ(p.events[3].kind, ProgramEvent::Kind::kRetag);
  EXPECT_EQ(p.events[3].role, MemoryRole::kGradients);
  ASSERT_EQ(p.marks.size(), 2u);
  EXPECT_EQ(p.marks[1].event, 4u);
  EXPECT_EQ(p.marks[1].phase, Phase::kBackward);
}

TEST(AllocationProgram, AFreeOfAFreedTensorIsAConstructionBug) {
  AllocationTape tape;
  const auto a = tape.alloc(512, MemoryRole::kBatch);
  tape.free(a);
  EXPECT_THROW(tape.free(a), std::logic_error);
}

TEST(AllocationProgram, RolesAndPhasesHaveTheirReportNames) {
  EXPECT_EQ(role_key(MemoryRole::kOptimizerState), "optimizer_state");
  EXPECT_EQ(role_key(MemoryRole::kWorkspaces), "cublas_workspace");
  EXPECT_EQ(phase_name(Phase::kOptimizerStep), "optimizer step");
  for (int r = 0; r < kMemoryRoles; ++r) EXPECT_NE(role_key(static_cast<MemoryRole>(r)), "?");
}

}  // namespace
}  // namespace fragscope::plan
