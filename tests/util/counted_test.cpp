#include "util/counted.h"

#include <gtest/gtest.h>

namespace fragscope {
namespace {

TEST(Counted, OneTakesTheSingular) { EXPECT_EQ(counted(1, "time", "times"), "1 time"); }

TEST(Counted, NoneAndManyTakeThePlural) {
  EXPECT_EQ(counted(0, "file", "files"), "0 files");
  EXPECT_EQ(counted(7, "earlier step", "earlier steps"), "7 earlier steps");
}

}  // namespace
}  // namespace fragscope
