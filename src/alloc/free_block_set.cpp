#include "alloc/free_block_set.h"

#include <stdexcept>

namespace fragscope::alloc {

void FreeBlockSet::insert_inside(std::vector<Entry>& entries, const Entry& entry) {
  using free_block_set_detail::key_of;
  // Of the inserts that do not land at the low end, many land at the high end (the front).
  const free_block_set_detail::Key key = key_of(entry.size, entry.packed);
  const std::size_t pos = key > key_of(entries.front().size, entries.front().packed)
                              ? 0
                              : free_block_set_detail::prefix_length(entries.data(), entries.size(),
                                                                     free_block_set_detail::after_key(key));
  entries.insert(entries.begin() + static_cast<std::ptrdiff_t>(pos), entry);
}

void FreeBlockSet::erase_inside(std::vector<Entry>& entries, std::uint64_t size, std::uint64_t address) {
  if (entries.front().size == size && entries.front().address() == address) {
    entries.erase(entries.begin());
    return;
  }
  // The handle is unknown: search with the highest packed key of this address.
  const std::size_t pos = free_block_set_detail::prefix_length(
      entries.data(), entries.size(),
      free_block_set_detail::after_key(free_block_set_detail::key_of(size, pack(address, 0) | kHandleMask)));
  if (pos == entries.size() || entries[pos].size != size || entries[pos].address() != address) {
    throw std::logic_error("FreeBlockSet::erase of a block that is not free");
  }
  entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(pos));
}

FreeBlockSet::Iterator FreeBlockSet::lower_bound_inside(std::uint32_t cls, std::uint64_t size) const {
  const std::vector<Entry>& entries = classes_[cls];
  const auto n = static_cast<std::uint32_t>(entries.size());
  const auto fits = static_cast<std::uint32_t>(free_block_set_detail::prefix_length(
      entries.data(), n, [size](const Entry& e) { return e.size >= size; }));
  return {this, cls, n - fits};
}

void FreeBlockSet::throw_out_of_range() {
  throw std::length_error("FreeBlockSet: address or block handle out of range");
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
