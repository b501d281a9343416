#include "alloc/caching_allocator.h"

#include <gtest/gtest.h>

// CachingAllocator::state (caching_allocator_state.cpp): what decides later calls, with segment
// addresses as their order only.
namespace fragscope::alloc {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

struct Harness {
  Harness() : model(CachingAllocatorOptions{}, device) {}
  std::vector<std::uint64_t> state() const { return model.state({}); }

  DeviceMemory device;
  CachingAllocator model;
};

TEST(CachingAllocatorState, ABlockServedFromTheCacheAndFreedLeavesItAsItWas) {
  Harness h;
  const BlockHandle kept = h.model.malloc(30 * kMiB, 0);
  h.model.free(h.model.malloc(12 * kMiB, 0));  // a 12 MiB segment, cached
  const std::vector<std::uint64_t> before = h.state();
  h.model.free(h.model.malloc(5 * kMiB, 0));  // split from the cached segment, merged back
  EXPECT_EQ(h.state(), before);
  h.model.free(h.model.malloc(40 * kMiB, 0));  // a new segment
  EXPECT_NE(h.state(), before);
  h.model.free(kept);
}

TEST(CachingAllocatorState, SegmentsAtOtherAddressesInTheSameOrderAreTheSameState) {
  // B's segments come later from the device (lower addresses) than A's: same layout, same state.
  Harness a, b;
  b.model.free(b.model.malloc(100 * kMiB, 0));
  b.model.empty_cache();
  std::vector<std::uint64_t> addresses;
  for (Harness* h : {&a, &b}) {
    addresses.push_back(h->model.address(h->model.malloc(30 * kMiB, 0)));
    h->model.free(h->model.malloc(12 * kMiB, 0));
  }
  EXPECT_NE(addresses[0], addresses[1]);
  EXPECT_EQ(a.state(), b.state());
}

TEST(CachingAllocatorState, EachAllocatedBlockCarriesItsLabelAndRequestedSize) {
  Harness h;
  const BlockHandle first = h.model.malloc(1000, 0);
  const BlockHandle second = h.model.malloc(1000, 0);
  const std::vector<std::uint64_t> plain = h.state();
  EXPECT_NE(h.model.state({{first, 1}, {second, 2}}), h.model.state({{first, 2}, {second, 1}}));
  EXPECT_NE(h.model.state({{first, 1}}), plain);
  h.model.free(second);
  EXPECT_NE(h.state(), plain);
  const BlockHandle bigger = h.model.malloc(1001, 0);  // the same 1,024-byte block, another request
  EXPECT_NE(h.state(), plain);
  h.model.free(bigger);
  h.model.malloc(1000, 0);
  EXPECT_EQ(h.state(), plain);
}

}  // namespace
}  // namespace fragscope::alloc
