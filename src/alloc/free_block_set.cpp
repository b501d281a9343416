#include "alloc/free_block_set.h"

#include <stdexcept>

namespace fragscope::alloc {

FreeBlockSet::Iterator FreeBlockSet::first_from(std::uint32_t cls) const {
  if (cls >= kClasses) return end();
  std::uint32_t word = cls / 64;
  std::uint64_t bits = nonempty_[word] & (~0ull << (cls % 64));
  while (bits == 0) {
    if (++word == kWords) return end();
    bits = nonempty_[word];
  }
  return {this, word * 64 + static_cast<std::uint32_t>(std::countr_zero(bits)), 0};
}

std::uint64_t FreeBlockSet::memory_bytes() const {
  std::uint64_t bytes = classes_.capacity() * sizeof(std::vector<Entry>);
  for (const std::vector<Entry>& entries : classes_) bytes += entries.capacity() * sizeof(Entry);
  return bytes;
}

std::uint32_t FreeBlockSet::last_before(std::uint32_t cls) const {
  // REQUIRES (by Iterator::operator--): a non-empty class below cls exists.
  std::int32_t word = static_cast<std::int32_t>(cls / 64);
  std::uint64_t bits = (cls % 64 == 0) ? 0 : nonempty_[static_cast<std::size_t>(word)] &
                                                 ((1ull << (cls % 64)) - 1);
  while (bits == 0) {
    if (--word < 0) throw std::logic_error("FreeBlockSet: decrement past begin()");
    bits = nonempty_[static_cast<std::size_t>(word)];
  }
  return static_cast<std::uint32_t>(word) * 64 + 63 - static_cast<std::uint32_t>(std::countl_zero(bits));
}

}  // namespace fragscope::alloc
