// Unit alignment (diagnose/unit_alignment.h): two steps of the same program, the second at twice
// the sequence length, are matched statement by statement, and their size ratio is told; a lone
// allocation reached through another code path pairs at its position; a unit whose head a ring
// cut is matched backwards from the failing malloc.
#include "diagnose/unit_alignment.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace fragscope::diagnose {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

/// Appends an allocation of `size` bytes from call stack `stack`; returns its event index.
std::size_t alloc(std::vector<snapshot::TraceEvent>& trace, std::uint64_t size, snapshot::StackId stack) {
  snapshot::TraceEvent e;
  e.action = snapshot::TraceAction::kAlloc;
  e.size = size;
  e.stack = stack;
  e.addr = 0x1000 * (trace.size() + 1);
  trace.push_back(e);
  return trace.size() - 1;
}

struct TwoUnits {
  std::vector<snapshot::TraceEvent> trace;
  std::vector<std::size_t> a, b;
  std::vector<std::uint32_t> a_stacks, b_stacks;
};

/// Step a: embedding (stack 1, 8 MiB), attention (2, 16 MiB), a small scalar (3), logits (4,
/// 32 MiB). Step b runs the same at twice the length and allocates an extra buffer (5) between
/// attention and logits: activations double, the scalar does not.
TwoUnits two_units() {
  TwoUnits u;
  const std::uint64_t sizes[] = {8 * kMiB, 16 * kMiB, 512, 32 * kMiB};
  const std::uint32_t stacks[] = {1, 2, 3, 4};
  for (int i = 0; i < 4; ++i) {
    u.a.push_back(alloc(u.trace, sizes[i], stacks[i]));
    u.a_stacks.push_back(stacks[i]);
  }
  for (int i = 0; i < 4; ++i) {
    if (i == 3) {
      u.b.push_back(alloc(u.trace, 4 * kMiB, 5));
      u.b_stacks.push_back(5);
    }
    u.b.push_back(alloc(u.trace, i == 2 ? sizes[i] : 2 * sizes[i], stacks[i]));
    u.b_stacks.push_back(stacks[i]);
  }
  return u;
}

TEST(UnitAlignment, StatementsAreMatchedByCallStackAndTheScaleIsTheSizeRatio) {
  const TwoUnits u = two_units();
  double scale = 0;
  const auto pairs = align_units(u.trace, u.a, u.a_stacks, u.a.size(), u.b, u.b_stacks, u.b.size(), scale);
  ASSERT_TRUE(pairs);
  const AlignedPairs expected = {{0, 0}, {1, 1}, {2, 2}, {3, 4}};  // b's extra buffer (position 3) has none
  EXPECT_EQ(*pairs, expected);
  EXPECT_DOUBLE_EQ(scale, 2.0);
}

TEST(UnitAlignment, FramelessAllocationsPairOnlyAtACompatibleSize) {
  TwoUnits u = two_units();
  // The attention buffer loses its frames in both steps (autograd's thread): it still pairs,
  // since its sizes are in the units' ratio; a frame-less 3 MiB buffer in b has no partner.
  u.a_stacks[1] = u.b_stacks[1] = 0;
  u.b.insert(u.b.begin() + 2, alloc(u.trace, 3 * kMiB, 0));
  u.b_stacks.insert(u.b_stacks.begin() + 2, 0);
  double scale = 0;
  const auto pairs = align_units(u.trace, u.a, u.a_stacks, u.a.size(), u.b, u.b_stacks, u.b.size(), scale);
  ASSERT_TRUE(pairs);
  const AlignedPairs expected = {{0, 0}, {1, 1}, {2, 3}, {3, 5}};
  EXPECT_EQ(*pairs, expected);
  EXPECT_DOUBLE_EQ(scale, 2.0);
}

TEST(UnitAlignment, ALoneAllocationReachedThroughAnotherCodePathPairsAtItsPosition) {
  // b reaches the attention buffer through another call stack (cuDNN's plan cache where a's first step searched
  // its plans) and fails at its logits, also from another stack: both still pair, one allocation in each unit
  // at the same position, in the units' ratio.
  TwoUnits u = two_units();
  u.b.erase(u.b.begin() + 3);  // without b's extra buffer: the logits follow the scalar in both
  u.b_stacks.erase(u.b_stacks.begin() + 3);
  u.b_stacks[1] = 7;
  u.b_stacks.back() = 8;
  double scale = 0;
  auto pairs = align_units(u.trace, u.a, u.a_stacks, u.a.size(), u.b, u.b_stacks, u.b.size(), scale);
  ASSERT_TRUE(pairs);
  const AlignedPairs expected = {{0, 0}, {1, 1}, {2, 2}, {3, 3}};
  EXPECT_EQ(*pairs, expected);
  EXPECT_DOUBLE_EQ(scale, 2.0);
  // Sizes in no ratio of the units' scale are other allocations: the buffer stays single.
  u.trace[u.b[1]].size = 3 * kMiB;
  pairs = align_units(u.trace, u.a, u.a_stacks, u.a.size(), u.b, u.b_stacks, u.b.size(), scale);
  ASSERT_TRUE(pairs);
  const AlignedPairs without_buffer = {{0, 0}, {2, 2}, {3, 3}};
  EXPECT_EQ(*pairs, without_buffer);
}

TEST(UnitAlignment, ACutUnitIsMatchedBackwardsFromTheFailingMalloc) {
  // The ring kept only a's last two allocations (attention's scalar and the logits); b, the
  // failing unit, failed at its logits: the pairs end at b's last, and b's head has none.
  TwoUnits u = two_units();
  const std::vector<std::size_t> tail(u.a.begin() + 2, u.a.end());
  const std::vector<std::uint32_t> tail_stacks(u.a_stacks.begin() + 2, u.a_stacks.end());
  double scale = 0;
  const auto pairs = align_cut_unit(u.trace, tail, tail_stacks, tail.size(), u.b, u.b_stacks, scale);
  ASSERT_TRUE(pairs);
  const AlignedPairs expected = {{0, 2}, {1, 4}};
  EXPECT_EQ(*pairs, expected);
  EXPECT_DOUBLE_EQ(scale, 2.0);
  // A failing malloc from a statement the cut unit never ran has no counterpart.
  std::vector<std::uint32_t> other = u.b_stacks;
  other.back() = 9;
  EXPECT_FALSE(align_cut_unit(u.trace, tail, tail_stacks, tail.size(), u.b, other, scale));
}

}  // namespace
}  // namespace fragscope::diagnose
