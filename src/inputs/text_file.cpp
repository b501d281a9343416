#include "inputs/text_file.h"

#include "util/input_file.h"

namespace fragscope::inputs {

std::string read_text_file(const std::filesystem::path& path, std::uint64_t max_bytes, std::string_view what) {
  return read_bounded(path.string(), max_bytes, what);
}

std::string printable_excerpt(std::string_view text, std::size_t max_chars) {
  std::string out;
  for (const char c : text.substr(0, max_chars)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  if (text.size() > max_chars) out += "...";
  return out;
}

}  // namespace fragscope::inputs
