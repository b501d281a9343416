#pragma once
/// @file free_block_set.h
/// @brief The free blocks of one (stream, pool), ordered as PyTorch's BlockComparatorSize:
/// by size, then address. Best fit is lower_bound(size).
///
/// PyTorch keeps these in a std::set; a replay does millions of lookups, so this set is laid
/// out for speed instead (as TLSF allocators do): sizes fall into 16 sub-classes per power of
/// two, each class is a small vector sorted by (size, address), and a bitmap finds the next
/// non-empty class. The class of a size grows with the size, so (class, size, address) order
/// is exactly (size, address) order: iteration and lower_bound match std::set's. Each class is
/// stored in descending order, so taking the best fit (the class's smallest entry: training
/// frees many blocks of one size) pops from the back without moving the others.
/// Limits: addresses below 2^48 (CUDA's are below 2^47), block handles below 2^25.
/// Thread-safety: none.

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <stdexcept>
#include <vector>

#include "alloc/allocator_model.h"

namespace fragscope::alloc {

class FreeBlockSet {
 public:
  /// One free block: 16 bytes, so a class's vector moves little when it changes.
  struct Entry {
    std::uint64_t size;
    std::uint64_t packed;  // address / 512 in the high 39 bits, the block handle in the low 25

    std::uint64_t address() const { return (packed >> kHandleBits) << 9; }
    BlockHandle block() const { return static_cast<BlockHandle>(packed & kHandleMask); }
  };
  static constexpr unsigned kHandleBits = 25;
  static constexpr std::uint64_t kHandleMask = (1ull << kHandleBits) - 1;
  /// @brief REQUIRES: address < 2^48, 512-aligned; block < 2^25.
  static std::uint64_t pack(std::uint64_t address, BlockHandle block) {
    return ((address >> 9) << kHandleBits) | block;
  }

  /// @brief Position of an entry; invalidated by any insert or erase.
  class Iterator {
   public:
    using iterator_category = std::bidirectional_iterator_tag;
    using value_type = Entry;
    using difference_type = std::ptrdiff_t;
    using pointer = const Entry*;
    using reference = const Entry&;

    const Entry& operator*() const {
      const std::vector<Entry>& entries = set_->classes_[class_];
      return entries[entries.size() - 1 - pos_];
    }
    const Entry* operator->() const { return &**this; }
    Iterator& operator++() {
      if (++pos_ == set_->classes_[class_].size()) *this = set_->first_from(class_ + 1);
      return *this;
    }
    Iterator operator++(int) {
      Iterator old = *this;
      ++*this;
      return old;
    }
    /// REQUIRES: *this != set.begin().
    Iterator& operator--() {
      if (pos_ > 0) {
        --pos_;
      } else {
        class_ = set_->last_before(class_);
        pos_ = static_cast<std::uint32_t>(set_->classes_[class_].size() - 1);
      }
      return *this;
    }
    friend bool operator==(const Iterator& a, const Iterator& b) {
      return a.class_ == b.class_ && a.pos_ == b.pos_;
    }

   private:
    friend class FreeBlockSet;
    Iterator(const FreeBlockSet* set, std::uint32_t cls, std::uint32_t pos)
        : set_(set), class_(cls), pos_(pos) {}
    const FreeBlockSet* set_;
    std::uint32_t class_;
    std::uint32_t pos_;
  };

  FreeBlockSet() : classes_(kClasses) {}

  void insert(std::uint64_t size, std::uint64_t address, BlockHandle block);
  /// @brief Removes the entry of (size, address). REQUIRES: present.
  void erase(std::uint64_t size, std::uint64_t address);
  /// @brief Removes *it (every iterator is invalidated).
  void erase(Iterator it);
  /// @brief The first entry with size ≥ `size` (lowest address among equals), or end().
  Iterator lower_bound(std::uint64_t size) const;

  Iterator begin() const { return first_from(0); }
  Iterator end() const { return {this, kClasses, 0}; }
  bool empty() const { return count_ == 0; }
  std::size_t size() const { return count_; }
  /// @brief The heap memory the set holds: its classes' arrays (24 KiB when empty), which keep
  /// their largest size.
  std::uint64_t memory_bytes() const;

 private:
  static constexpr std::uint32_t kSubBits = 4;  // 16 classes per power of two
  static constexpr std::uint32_t kClasses = 64 << kSubBits;
  static constexpr std::uint32_t kWords = kClasses / 64;

  static std::uint32_t class_of(std::uint64_t size) {
    if (size < (1u << kSubBits)) return static_cast<std::uint32_t>(size);
    const std::uint32_t log2 = static_cast<std::uint32_t>(std::bit_width(size)) - 1;
    const auto sub = static_cast<std::uint32_t>(size >> (log2 - kSubBits)) & ((1u << kSubBits) - 1);
    return (log2 << kSubBits) | sub;
  }
  Iterator first_from(std::uint32_t cls) const;  // first entry of the first class ≥ cls
  // The rare paths, out of line so that the inlined fast paths stay small: an insert above the
  // class's lowest entry, an erase of any but the lowest, a best fit inside the class.
  static void insert_inside(std::vector<Entry>& entries, const Entry& entry);
  static void erase_inside(std::vector<Entry>& entries, std::uint64_t size, std::uint64_t address);
  Iterator lower_bound_inside(std::uint32_t cls, std::uint64_t size) const;
  [[noreturn]] static void throw_out_of_range();
  std::uint32_t last_before(std::uint32_t cls) const;  // last non-empty class < cls
  void mark(std::uint32_t cls, bool nonempty) {
    const std::uint64_t bit = 1ull << (cls % 64);
    nonempty_[cls / 64] = nonempty ? (nonempty_[cls / 64] | bit) : (nonempty_[cls / 64] & ~bit);
  }

  std::vector<std::vector<Entry>> classes_;
  std::array<std::uint64_t, kWords> nonempty_{};
  std::size_t count_ = 0;
};


// Hot paths, inline: a replay calls them a few times per trace event; their rare cases are in
// free_block_set.cpp.

namespace free_block_set_detail {

/// Length of the prefix of [first, first + n) whose elements satisfy `pred` (the partition
/// point), by a binary search the compiler turns into conditional moves: classes can hold
/// hundreds of equal sizes, and a branchy search mispredicts half its steps.
template <typename Pred>
std::size_t prefix_length(const FreeBlockSet::Entry* first, std::size_t n, Pred pred) {
  if (n == 0) return 0;
  const FreeBlockSet::Entry* base = first;
  while (n > 1) {
    const std::size_t half = n / 2;
    base = pred(base[half]) ? base + half : base;  // a conditional move: no branch to mispredict
    n -= half;
  }
  return static_cast<std::size_t>(base - first) + (pred(*base) ? 1 : 0);
}

/// (size, packed) as one 128-bit integer: a single compare-and-borrow orders two entries.
__extension__ using Key = unsigned __int128;
inline Key key_of(std::uint64_t size, std::uint64_t packed) {
  return (static_cast<Key>(size) << 64) | packed;
}

/// Entries strictly after `key` in the descending physical order.
inline auto after_key(Key key) {
  return [key](const FreeBlockSet::Entry& e) { return key_of(e.size, e.packed) > key; };
}

}  // namespace free_block_set_detail

inline void FreeBlockSet::insert(std::uint64_t size, std::uint64_t address, BlockHandle block) {
  using free_block_set_detail::key_of;
  if (address >= (1ull << 48) || block > kHandleMask) [[unlikely]] throw_out_of_range();
  const std::uint32_t cls = class_of(size);
  std::vector<Entry>& entries = classes_[cls];
  const Entry entry{size, pack(address, block)};
  // Most inserts land at the low end of their class (the vector's back): no search, no move.
  if (entries.empty() || key_of(size, entry.packed) < key_of(entries.back().size, entries.back().packed)) {
    entries.push_back(entry);
  } else {
    insert_inside(entries, entry);
  }
  mark(cls, true);
  ++count_;
}

inline void FreeBlockSet::erase(std::uint64_t size, std::uint64_t address) {
  const std::uint32_t cls = class_of(size);
  std::vector<Entry>& entries = classes_[cls];
  if (!entries.empty() && entries.back().size == size && entries.back().address() == address) {
    entries.pop_back();  // the lowest (size, address) of its class: a third of all erases
  } else {
    erase_inside(entries, size, address);
  }
  --count_;
  if (entries.empty()) mark(cls, false);
}

inline void FreeBlockSet::erase(Iterator it) {
  std::vector<Entry>& entries = classes_[it.class_];
  entries.erase(entries.end() - 1 - it.pos_);
  --count_;
  if (entries.empty()) mark(it.class_, false);
}

inline FreeBlockSet::Iterator FreeBlockSet::lower_bound(std::uint64_t size) const {
  const std::uint32_t cls = class_of(size);
  const std::vector<Entry>& entries = classes_[cls];
  // Entries of at least `size` bytes form a prefix of the descending vector; the best fit is
  // its last element. Most lookups (7 in 10 on big) find none in their class, and most others
  // find all of it: both show at the ends.
  if (entries.empty() || entries.front().size < size) return first_from(cls + 1);
  if (entries.back().size >= size) return {this, cls, 0};
  return lower_bound_inside(cls, size);
}

inline FreeBlockSet::Iterator FreeBlockSet::first_from(std::uint32_t cls) const {
  if (cls >= kClasses) return end();
  std::uint32_t word = cls / 64;
  std::uint64_t bits = nonempty_[word] & (~0ull << (cls % 64));
  while (bits == 0) {
    if (++word == kWords) return end();
    bits = nonempty_[word];
  }
  return {this, word * 64 + static_cast<std::uint32_t>(std::countr_zero(bits)), 0};
}

}  // namespace fragscope::alloc
