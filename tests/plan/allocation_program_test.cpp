#include "plan/allocation_program.h"

#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

namespace fragscope::plan {
namespace {

TEST(AllocationProgram, TheTapeRecordsEventsAndMarksInOrder) {
  AllocationTape tape;
  tape.mark(ProgramPhase::kForward, 0);
  const auto a = tape.alloc(1000, MemoryRole::kActivations);
  const auto b = tape.alloc(2000, MemoryRole::kTransients, 1);
  tape.free(b);
  tape.retag(a, MemoryRole::kGradients);
  tape.mark(ProgramPhase::kBackward, 0);
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
  EXPECT_EQ(p.marks[1].phase, ProgramPhase::kBackward);
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
  EXPECT_EQ(program_phase_name(ProgramPhase::kOptimizerStep), "optimizer step");
  for (int r = 0; r < kMemoryRoles; ++r) EXPECT_NE(role_key(static_cast<MemoryRole>(r)), "?");
}

TEST(AllocationProgram, APieceIsTakenAsWrittenAndItsFreedIdsGivenOutAgain) {
  AllocationTape tape;
  std::vector<ProgramEvent> events;
  std::vector<ProgramMark> marks;
  const auto kept = tape.alloc(4096, MemoryRole::kParameters);
  tape.take_written(events, marks);
  EXPECT_EQ(events.size(), 1u);
  const auto first = tape.next_tensor();
  tape.mark(ProgramPhase::kForward, 0);
  const auto a = tape.alloc(1000, MemoryRole::kActivations);
  tape.free(a);
  tape.take_written(events, marks);
  ASSERT_EQ(events.size(), 2u);  // the piece's own, the marks indexing them
  ASSERT_EQ(marks.size(), 1u);
  EXPECT_EQ(marks[0].event, 0u);
  EXPECT_TRUE(tape.reuse_ids_from(first));
  EXPECT_EQ(tape.alloc(2000, MemoryRole::kActivations), a);  // the freed id again
  EXPECT_FALSE(tape.reuse_ids_from(first));                  // live: kept
  EXPECT_TRUE(tape.live(kept));
  EXPECT_EQ(tape.next_tensor(), a + 1);
}

}  // namespace
}  // namespace fragscope::plan
