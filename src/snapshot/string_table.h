#pragma once
/// @file string_table.h
/// @brief Interned strings: each distinct string is stored once and named by a 32-bit id.
///
/// Snapshots repeat the same file names, function names and actions millions of times; interning
/// keeps a 1 GB snapshot's model small. Id 0 is always the empty string.
/// Thread-safety: none; build on one thread, then share read-only.

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include <absl/container/flat_hash_map.h>

namespace fragscope::snapshot {

using StringId = std::uint32_t;

class StringTable {
 public:
  StringTable();
  StringTable(const StringTable&) = delete;
  StringTable& operator=(const StringTable&) = delete;
  StringTable(StringTable&&) = default;
  StringTable& operator=(StringTable&&) = default;

  /// @brief Returns the id of `text`, adding it when new. Views stay valid for the table's life.
  StringId intern(std::string_view text);
  /// @brief The string named by `id`. REQUIRES: id < size().
  std::string_view view(StringId id) const { return views_[id]; }
  std::size_t size() const { return views_.size(); }

 private:
  std::deque<std::string> storage_;  // deque: growth never moves the strings views point into
  std::vector<std::string_view> views_;
  absl::flat_hash_map<std::string_view, StringId> ids_;
};

}  // namespace fragscope::snapshot
