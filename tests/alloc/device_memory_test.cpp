#include "alloc/device_memory.h"

#include <gtest/gtest.h>

namespace fragscope::alloc {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

TEST(DeviceMemoryTest, CudaMallocFailsBeyondTheCapacity) {
  DeviceMemory device(100 * kMiB);
  const auto a = device.malloc(60 * kMiB);
  ASSERT_TRUE(a);
  EXPECT_FALSE(device.malloc(42 * kMiB));  // 60 + 42 > 100
  EXPECT_TRUE(device.malloc(40 * kMiB));   // exactly full is fine
  device.free(*a, 60 * kMiB);
  EXPECT_EQ(device.used(), 40 * kMiB);
  EXPECT_TRUE(device.map(60 * kMiB));
  EXPECT_FALSE(device.map(2 * kMiB));
}

TEST(DeviceMemoryTest, UsesTheRecordedAddressOfTheSameSize) {
  DeviceMemory device;
  const AddressHint hints[] = {{0x7f0000000000, 20 * kMiB}, {0x7f0002000000, 40 * kMiB}};
  device.offer_hints(hints);
  EXPECT_EQ(device.malloc(40 * kMiB), 0x7f0002000000u);
  EXPECT_EQ(device.malloc(20 * kMiB), 0x7f0000000000u);
  // No hint left: a fresh address, above every real one and never overlapping.
  const auto fresh = device.malloc(20 * kMiB);
  ASSERT_TRUE(fresh);
  EXPECT_GE(*fresh, 1ull << 47);
}

TEST(DeviceMemoryTest, NeverHandsOutAHintThatOverlapsALiveSegment) {
  DeviceMemory device;
  const AddressHint first[] = {{0x7f0000000000, 20 * kMiB}};
  device.offer_hints(first);
  ASSERT_EQ(device.malloc(20 * kMiB), 0x7f0000000000u);
  const AddressHint again[] = {{0x7f0000000000, 20 * kMiB}};
  device.offer_hints(again);
  EXPECT_NE(device.malloc(20 * kMiB), 0x7f0000000000u);
}

// Fresh addresses live in [2^47, 2^48): a hostile trace's hundreds of expandable ranges the size
// of a device ran past 2^48 and into an internal error; now they stop with an exception the replay
// turns into an input error.
TEST(DeviceMemoryTest, FreshAddressesRunOutWithAnExceptionNotPast2To48) {
  DeviceMemory device;
  constexpr std::uint64_t kRange = 1ull << 40;  // 1 TiB: 128 fit
  for (int i = 0; i < 128; ++i) EXPECT_GE(device.reserve_address_space(kRange), 1ull << 47);
  EXPECT_THROW(device.reserve_address_space(kRange), AddressSpaceExhausted);
  EXPECT_THROW(device.malloc(2 * kMiB), AddressSpaceExhausted);
  EXPECT_THROW(device.reserve_address_space(~0ull), AddressSpaceExhausted);
}

}  // namespace
}  // namespace fragscope::alloc
