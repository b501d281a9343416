#pragma once
/// @file field_map.h
/// @brief The fields of a steps.jsonl record that have no member of their own (memory_stats values, fields
/// nobody here knows): name → value in one vector sorted by name, the names shared (shared_text.h).
///
/// Why: a std::map costs a node per field (links, a string, often a second allocation for the name): on a
/// line of ten memory_stats values, more than the line. Here a field costs a reference to its name and its
/// value, and the reader makes each map at once, exactly sized. Iterates in name order, as the std::map did
/// (the writer's order).
/// Thread-safety: a plain value.

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "inputs/shared_text.h"

namespace fragscope::inputs {

template <typename V>
class FieldMap {
 public:
  struct Field {
    SharedText name;
    V value;
  };

  FieldMap() = default;
  /// @brief The map of `fields`, sorted by name and each name once (a JSON object's, as parsed).
  /// @throws std::invalid_argument when they are not.
  explicit FieldMap(std::vector<Field> fields) : fields_(std::move(fields)) {
    for (std::size_t i = 0; i < fields_.size(); ++i)
      if (!fields_[i].name || (i > 0 && !(*fields_[i - 1].name < *fields_[i].name)))
        throw std::invalid_argument("FieldMap: fields not named in strictly increasing order");
  }

  bool empty() const { return fields_.empty(); }
  std::size_t size() const { return fields_.size(); }
  auto begin() const { return fields_.begin(); }
  auto end() const { return fields_.end(); }

  /// @brief The value of `name`, or nullptr.
  const V* find(std::string_view name) const {
    const auto it = lower_bound(name);
    return it != fields_.end() && *it->name == name ? &it->value : nullptr;
  }
  /// @throws std::out_of_range when there is no `name`.
  const V& at(std::string_view name) const {
    if (const V* value = find(name)) return *value;
    throw std::out_of_range("FieldMap: no field named " + std::string(name));
  }
  /// @brief The value of `name`, added (value-initialised) when absent: for records made by code.
  V& operator[](std::string_view name) {
    const auto it = lower_bound(name);
    if (it != fields_.end() && *it->name == name) return fields_[it - fields_.begin()].value;
    return fields_.insert(fields_.begin() + (it - fields_.begin()), Field{SharedText(name), V{}})->value;
  }

  /// @brief Heap bytes the map holds (its vector, and a string value's own buffer); the names not counted,
  /// since records share them.
  std::size_t heap_bytes() const {
    std::size_t bytes = fields_.capacity() * sizeof(Field);
    if constexpr (std::is_same_v<V, std::string>) {
      static const std::size_t inline_capacity = std::string().capacity();
      for (const Field& f : fields_)
        if (f.value.capacity() > inline_capacity) bytes += f.value.capacity() + 1;
    }
    return bytes;
  }

 private:
  auto lower_bound(std::string_view name) const {
    return std::lower_bound(fields_.begin(), fields_.end(), name,
                            [](const Field& f, std::string_view n) { return std::string_view(*f.name) < n; });
  }

  std::vector<Field> fields_;
};

}  // namespace fragscope::inputs
