// StackTable: frames and stacks are stored once and named by ids; stack 0 is the empty stack;
// a stack reads back its frames innermost first, however many stacks share frames or prefixes.
#include "snapshot/stack_table.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace fragscope::snapshot {
namespace {

TEST(StackTable, EqualFramesAndStacksShareOneId) {
  StackTable t;
  EXPECT_EQ(t.stack_count(), 1u);  // the empty stack
  EXPECT_TRUE(t.stack(0).empty());
  const FrameId a = t.intern_frame({1, 2, 10});
  const FrameId b = t.intern_frame({1, 2, 11});  // another line of the same function
  const FrameId c = t.intern_frame({3, 2, 10});  // another file
  EXPECT_EQ(t.intern_frame({1, 2, 10}), a);
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(t.frame_count(), 3u);
  EXPECT_EQ(t.frame(b).line, 11);
  const std::vector<FrameId> abc = {a, b, c}, cba = {c, b, a}, ab = {a, b};
  const StackId s1 = t.intern_stack(abc);
  EXPECT_NE(s1, 0u);
  EXPECT_EQ(t.intern_stack(std::vector<FrameId>{a, b, c}), s1);
  EXPECT_NE(t.intern_stack(cba), s1) << "order matters: innermost first";
  EXPECT_NE(t.intern_stack(ab), s1) << "a prefix is another stack";
  EXPECT_EQ(t.intern_stack({}), 0u);
  EXPECT_EQ(t.stack_count(), 4u);
  const auto frames = t.stack(s1);
  EXPECT_EQ(std::vector<FrameId>(frames.begin(), frames.end()), abc);
}

TEST(StackTable, ManyStacksReadBackExactly) {
  StackTable t;
  std::mt19937 random(7);
  std::vector<std::vector<FrameId>> stacks;
  std::vector<StackId> ids;
  for (int i = 0; i < 20000; ++i) {
    std::vector<FrameId> frames(1 + random() % 12);
    for (auto& f : frames)
      f = t.intern_frame({static_cast<StringId>(random() % 50), 1, static_cast<std::int64_t>(random() % 40)});
    ids.push_back(t.intern_stack(frames));
    stacks.push_back(std::move(frames));
  }
  EXPECT_LE(t.frame_count(), 50u * 40u);
  for (std::size_t i = 0; i < stacks.size(); ++i) {
    const auto back = t.stack(ids[i]);
    ASSERT_EQ(std::vector<FrameId>(back.begin(), back.end()), stacks[i]) << i;
    ASSERT_EQ(t.intern_stack(stacks[i]), ids[i]) << i;
  }
}

}  // namespace
}  // namespace fragscope::snapshot
