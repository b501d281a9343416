// SharedText and its pool: one copy of a text however many records hold it, counted once.
#include "inputs/shared_text.h"

#include <string>

#include <gtest/gtest.h>

namespace fragscope::inputs {
namespace {

TEST(SharedText, ReadsAsAnOptionalString) {
  SharedText none;
  EXPECT_FALSE(none.has_value());
  EXPECT_FALSE(none == "");
  EXPECT_EQ(none.text_bytes(), 0u);
  SharedText phase = "eval";
  EXPECT_TRUE(phase);
  EXPECT_EQ(phase, "eval");
  EXPECT_EQ(*phase, std::string("eval"));
  EXPECT_EQ(phase->size(), 4u);
  phase = std::nullopt;
  EXPECT_FALSE(phase.has_value());
}

TEST(SharedText, APoolGivesOneCopyPerText) {
  SharedTextPool pool;
  const SharedText a = pool.get("allocated_bytes.all.current");
  const SharedText b = pool.get(std::string("allocated_bytes.all.") + "current");
  const SharedText c = pool.get("num_ooms");
  EXPECT_EQ(a.identity(), b.identity());
  EXPECT_NE(a.identity(), c.identity());
  EXPECT_NE(SharedText("num_ooms").identity(), c.identity());  // made outside the pool: its own
  EXPECT_EQ(a, "allocated_bytes.all.current");
  // A long text's buffer counts; a short one fits in its string. The pool counts each text once, and its table.
  EXPECT_EQ(a.text_bytes(), c.text_bytes() + std::string(a->data()).capacity() + 1);
  EXPECT_GE(pool.memory_bytes(), a.text_bytes() + c.text_bytes());
  EXPECT_LT(pool.memory_bytes(), 2 * (a.text_bytes() + c.text_bytes()) + 256);
}

}  // namespace
}  // namespace fragscope::inputs
