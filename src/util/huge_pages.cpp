#include "util/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>

namespace fragscope {

namespace {

std::size_t round_up(std::size_t bytes) { return (bytes + kHugePageSize - 1) & ~(kHugePageSize - 1); }

}  // namespace

void* allocate_huge_pages(std::size_t bytes) {
  const std::size_t length = round_up(bytes);
  if (length < bytes) throw std::bad_alloc();
  // Over-map by one huge page, then trim both ends so the region starts on a 2 MiB boundary:
  // only aligned 2 MiB ranges can be huge pages.
  void* raw = mmap(nullptr, length + kHugePageSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + kHugePageSize - 1) & ~(std::uintptr_t{kHugePageSize} - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const std::size_t tail = start + kHugePageSize - aligned;
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + length), tail);
  madvise(reinterpret_cast<void*>(aligned), length, MADV_HUGEPAGE);  // a hint: failure is harmless
  return reinterpret_cast<void*>(aligned);
}

void free_huge_pages(void* memory, std::size_t bytes) noexcept { munmap(memory, round_up(bytes)); }

}  // namespace fragscope
