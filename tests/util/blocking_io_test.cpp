// make_blocking: a pipe opened without waiting for its other end reads and writes blocking after.
#include "util/blocking_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace fragscope {
namespace {

TEST(BlockingIo, ClearsOnlyNonBlocking) {
  int ends[2];
  ASSERT_EQ(::pipe2(ends, O_NONBLOCK | O_CLOEXEC), 0);
  ASSERT_TRUE(make_blocking(ends[0]));
  EXPECT_EQ(::fcntl(ends[0], F_GETFL) & O_NONBLOCK, 0);
  EXPECT_NE(::fcntl(ends[0], F_GETFD) & FD_CLOEXEC, 0);  // descriptor flags untouched
  EXPECT_NE(::fcntl(ends[1], F_GETFL) & O_NONBLOCK, 0);  // the other end keeps its own
  ::close(ends[0]);
  ::close(ends[1]);
}

TEST(BlockingIo, AClosedDescriptorIsAFailure) {
  int ends[2];
  ASSERT_EQ(::pipe(ends), 0);
  ::close(ends[0]);
  ::close(ends[1]);
  EXPECT_FALSE(make_blocking(ends[0]));
}

}  // namespace
}  // namespace fragscope
