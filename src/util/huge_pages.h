#pragma once
/// @file huge_pages.h
/// @brief An allocator that backs large arrays with transparent huge pages.
///
/// Why: the reader writes arrays of tens of megabytes once, front to back (memo, objects, trace
/// events). With 4 KiB pages each 4 KiB written costs a page fault; on the 110 MB `big` fixture
/// that was a fifth of `analyze`'s time. Linux's default THP mode is `madvise`, so huge pages
/// must be asked for per mapping: regions of at least kHugePageThreshold bytes are mmap'ed,
/// aligned to 2 MiB and marked MADV_HUGEPAGE. Smaller ones go to operator new. Where the kernel
/// has THP off, the hint is ignored and the memory is ordinary pages.

#include <cstddef>
#include <new>

namespace fragscope {

inline constexpr std::size_t kHugePageSize = std::size_t{2} << 20;
inline constexpr std::size_t kHugePageThreshold = std::size_t{1} << 20;

/// @brief `bytes` of zero-filled memory aligned to kHugePageSize, advised to use huge pages.
/// REQUIRES: bytes >= kHugePageThreshold.
/// @throws std::bad_alloc when the address space is exhausted.
void* allocate_huge_pages(std::size_t bytes);

/// @brief Returns memory from allocate_huge_pages. REQUIRES: `bytes` as allocated.
void free_huge_pages(void* memory, std::size_t bytes) noexcept;

/// @brief std::allocator replacement: arrays of kHugePageThreshold bytes or more get huge pages.
/// Stateless; every instance compares equal. Thread-safety: as the system allocator.
template <class T>
class HugePageAllocator {
 public:
  using value_type = T;
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "over-aligned types are not supported");

  HugePageAllocator() noexcept = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}  // NOLINT: allocator rebinding

  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kHugePageThreshold) return static_cast<T*>(::operator new(bytes));
    return static_cast<T*>(allocate_huge_pages(bytes));
  }

  void deallocate(T* p, std::size_t n) noexcept {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kHugePageThreshold) ::operator delete(p);
    else free_huge_pages(p, bytes);
  }

  friend bool operator==(const HugePageAllocator&, const HugePageAllocator&) noexcept { return true; }
};

}  // namespace fragscope
