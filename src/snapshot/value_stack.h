#pragma once
/// @file value_stack.h
/// @brief The pickle machine's operand stack: a vector whose push is a compare and a store.
///
/// std::vector::push_back was not inlined into the opcode loop (its growth path is large), and
/// it was 6% of reading a snapshot. Here the owner checks full() and calls grow() out of line
/// (where it also enforces its limit), and the store is inline.
/// Thread-safety: none (one per machine).

#include <cstddef>
#include <memory>

#include "snapshot/pickle_value.h"

namespace fragscope::snapshot::pickle {

class ValueStack {
 public:
  ValueStack() { grow(); }

  bool full() const { return size_ == capacity_; }
  /// REQUIRES: !full().
  [[gnu::always_inline]] void push_unchecked(Value v) { data_[size_++] = v; }
  /// Doubles the capacity.
  [[gnu::noinline]] void grow() {
    const std::size_t capacity = capacity_ ? capacity_ * 2 : std::size_t{1} << 16;
    auto bigger = std::make_unique_for_overwrite<Value[]>(capacity);
    for (std::size_t i = 0; i < size_; ++i) bigger[i] = data_[i];
    data_ = std::move(bigger);
    capacity_ = capacity;
  }
  /// REQUIRES: !empty().
  void pop_back() { --size_; }
  /// REQUIRES: !empty().
  Value& back() { return data_[size_ - 1]; }
  /// REQUIRES: n <= size(): only shrinks.
  void resize(std::size_t n) { size_ = n; }
  Value& operator[](std::size_t i) { return data_[i]; }
  Value operator[](std::size_t i) const { return data_[i]; }
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return capacity_; }
  bool empty() const { return size_ == 0; }
  Value* data() { return data_.get(); }
  Value* begin() { return data_.get(); }
  Value* end() { return data_.get() + size_; }

 private:
  std::unique_ptr<Value[]> data_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

}  // namespace fragscope::snapshot::pickle
