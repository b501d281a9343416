#pragma once
/// @file string_table.h
/// @brief Interned strings: each distinct string is stored once and named by a 32-bit id.
///
/// Snapshots repeat the same file names, function names and actions millions of times; interning
/// keeps a 1 GB snapshot's model small. Id 0 is always the empty string.
/// Thread-safety: none; build on one thread, then share read-only.

#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "util/little_endian.h"

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
  StringId intern(std::string_view text) {
    if (text.size() <= kShortMax) return intern_short(text, text.size());
    return intern_long(text);
  }
  /// @brief intern(text) for text inside a larger buffer: reads whole words, not bytes.
  /// REQUIRES: the 16 bytes from text.data() are readable.
  StringId intern_in_buffer(std::string_view text) {
    if (text.size() <= 8) {  // the same short string as last time? ('N/A' in every trace entry)
      const std::uint64_t word = load_little_endian(text.data(), text.size(), 16);
      if (word == last_word_ && text.size() == last_length_) return last_id_;
      last_id_ = intern_short(text, 16);
      last_word_ = word;
      last_length_ = text.size();
      return last_id_;
    }
    if (text.size() <= kShortMax) return intern_short(text, 16);
    return intern_long(text);
  }
  /// @brief The string named by `id`. REQUIRES: id < size().
  std::string_view view(StringId id) const { return views_[id]; }
  std::size_t size() const { return views_.size(); }
  /// @brief About the memory the table holds (its strings, their views and index), for the
  /// reader's budget (read_limits.h).
  std::uint64_t memory_bytes() const { return text_bytes_ + views_.size() * kBytesPerString; }

 private:
  // Short strings (keys, actions, 'N/A') repeat millions of times in a row: a direct-mapped
  // cache of their bytes answers most lookups before the hash map is asked.
  static constexpr std::size_t kShortMax = 16;
  struct ShortEntry {
    std::uint64_t low = 0, high = 0;
    std::uint32_t length = ~0u;  // no string has this length: the slot is empty
    StringId id = 0;
  };
  StringId intern_short(std::string_view text, std::size_t readable);
  StringId intern_long(std::string_view text);

  std::array<ShortEntry, 256> short_cache_{};
  std::uint64_t last_word_ = 0;  // the last string of up to 8 bytes that intern_in_buffer saw
  std::size_t last_length_ = ~std::size_t{0};  // no string has this length: none yet
  StringId last_id_ = 0;
  // A string's std::string (32 B, past 15 bytes its heap block), view (16 B) and index slot (~32 B).
  static constexpr std::uint64_t kBytesPerString = 96;
  std::uint64_t text_bytes_ = 0;
  std::deque<std::string> storage_;  // deque: growth never moves the strings views point into
  std::vector<std::string_view> views_;
  absl::flat_hash_map<std::string_view, StringId> ids_;
};

}  // namespace fragscope::snapshot
