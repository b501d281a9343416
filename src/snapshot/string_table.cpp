#include "snapshot/string_table.h"

#include <algorithm>

#include "util/little_endian.h"

namespace fragscope::snapshot {

StringTable::StringTable() { intern(""); }

// REQUIRES: text.size() <= kShortMax, and `readable` (>= text.size()) bytes from text.data()
// are readable.
StringId StringTable::intern_short(std::string_view text, std::size_t readable) {
  const std::size_t n = text.size();
  const std::uint64_t words[2] = {
      load_little_endian(text.data(), std::min<std::size_t>(n, 8), readable),
      n > 8 ? load_little_endian(text.data() + 8, n - 8, readable - 8) : 0};
  const std::uint64_t hash = (words[0] * 0x9e3779b97f4a7c15ull) ^ (words[1] * 0xc2b2ae3d27d4eb4full) ^ text.size();
  ShortEntry& slot = short_cache_[(hash * 0x165667b19e3779f9ull) >> 56];
  if (slot.length == text.size() && slot.low == words[0] && slot.high == words[1]) return slot.id;
  const StringId id = intern_long(text);
  slot = {words[0], words[1], static_cast<std::uint32_t>(text.size()), id};
  return id;
}

StringId StringTable::intern_long(std::string_view text) {
  if (auto it = ids_.find(text); it != ids_.end()) return it->second;
  const std::string& stored = storage_.emplace_back(text);
  text_bytes_ += text.size();
  const auto id = static_cast<StringId>(views_.size());
  views_.push_back(stored);
  ids_.emplace(views_.back(), id);
  return id;
}

}  // namespace fragscope::snapshot
