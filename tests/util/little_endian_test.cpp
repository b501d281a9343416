#include "util/little_endian.h"

#include <cstdint>

#include <gtest/gtest.h>

namespace fragscope {
namespace {

// The same value whether the bytes after the field are readable (one masked word) or not
// (a copy of exactly n bytes), and whatever those bytes hold.
TEST(LittleEndian, LoadsNBytesWhateverFollows) {
  const std::uint8_t bytes[16] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x88,
                                  0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  const std::uint64_t expected[9] = {0, 0x01, 0x0201, 0x030201, 0x04030201, 0x0504030201,
                                     0x060504030201, 0x07060504030201, 0x8807060504030201};
  for (std::size_t n = 0; n <= 8; ++n) {
    SCOPED_TRACE(n);
    EXPECT_EQ(load_little_endian(bytes, n, 16), expected[n]);
    EXPECT_EQ(load_little_endian(bytes, n, n), expected[n]);
  }
}

}  // namespace
}  // namespace fragscope
