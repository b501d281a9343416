#include "snapshot/string_table.h"

namespace fragscope::snapshot {

StringTable::StringTable() { intern(""); }

StringId StringTable::intern(std::string_view text) {
  if (auto it = ids_.find(text); it != ids_.end()) return it->second;
  const std::string& stored = storage_.emplace_back(text);
  const auto id = static_cast<StringId>(views_.size());
  views_.push_back(stored);
  ids_.emplace(views_.back(), id);
  return id;
}

}  // namespace fragscope::snapshot
