#include "snapshot/string_table.h"

#include <cstring>

namespace fragscope::snapshot {

StringTable::StringTable() { intern(""); }

StringId StringTable::intern_short(std::string_view text) { return intern_words(text, text.size()); }

// REQUIRES: text.size() <= kShortMax <= readable; `readable` bytes from text.data() readable.
StringId StringTable::intern_words(std::string_view text, std::size_t readable) {
  std::uint64_t words[2] = {0, 0};
  if (readable >= 16) {
    // Two whole-word loads, the bytes past the text masked off: copying a variable number of
    // bytes and reading them back as words stalls on store forwarding.
    std::memcpy(&words[0], text.data(), 8);
    std::memcpy(&words[1], text.data() + 8, 8);
    const std::size_t n = text.size();
    words[0] &= n >= 8 ? ~0ull : (1ull << (8 * n)) - 1;
    words[1] &= n >= 16 ? ~0ull : n <= 8 ? 0 : (1ull << (8 * (n - 8))) - 1;
  } else {
    std::memcpy(words, text.data(), text.size());
  }
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
  const auto id = static_cast<StringId>(views_.size());
  views_.push_back(stored);
  ids_.emplace(views_.back(), id);
  return id;
}

}  // namespace fragscope::snapshot
