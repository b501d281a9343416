// Huge-page-backed arrays: large ones come zero-filled, writable end to end and aligned to 2 MiB
// (only aligned 2 MiB ranges can be huge pages); small ones and containers behave as with
// std::allocator.
#include "util/huge_pages.h"

#include <cstdint>
#include <new>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

namespace fragscope {
namespace {

TEST(HugePages, LargeRegionsAreAlignedZeroFilledAndWritable) {
  for (const std::size_t bytes : {kHugePageThreshold, kHugePageSize + 1, 5 * kHugePageSize + 12345}) {
    auto* memory = static_cast<unsigned char*>(allocate_huge_pages(bytes));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(memory) % kHugePageSize, 0u) << bytes;
    EXPECT_EQ(std::accumulate(memory, memory + bytes, std::uint64_t{0}), 0u) << bytes;
    for (std::size_t i = 0; i < bytes; i += 4096) memory[i] = 0xab;
    memory[bytes - 1] = 0xcd;
    EXPECT_EQ(memory[bytes - 1], 0xcd);
    free_huge_pages(memory, bytes);
  }
}

TEST(HugePages, TheAllocatorServesContainersOfEverySize) {
  std::vector<std::uint64_t, HugePageAllocator<std::uint64_t>> values;
  for (std::uint64_t i = 0; i < 1'000'000; ++i) values.push_back(i);  // grows through both paths
  EXPECT_EQ(std::accumulate(values.begin(), values.end(), std::uint64_t{0}), 999'999ull * 1'000'000 / 2);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(values.data()) % kHugePageSize, 0u);
  std::vector<int, HugePageAllocator<int>> small(10, 7);
  EXPECT_EQ(small[9], 7);
  EXPECT_THROW(HugePageAllocator<std::uint64_t>().allocate(static_cast<std::size_t>(-1) / 4),
               std::bad_array_new_length);
  EXPECT_TRUE(HugePageAllocator<int>() == HugePageAllocator<int>(HugePageAllocator<char>()));  // stateless
}

}  // namespace
}  // namespace fragscope
