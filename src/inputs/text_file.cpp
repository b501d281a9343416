#include "inputs/text_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <system_error>

#include <fmt/format.h>

#include "util/error.h"

namespace fragscope::inputs {

std::string read_text_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(fmt::format("{}: cannot read (is a directory)", path.string()));
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxTextFileBytes)
    throw InputError(fmt::format("{}: cannot read (file of {} bytes is larger than the {} "
                                 "bytes a text input may have)",
                                 path.string(), size, kMaxTextFileBytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot read ({})", path.string(), std::strerror(errno)));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw InputError(fmt::format("{}: read error", path.string()));
  return bytes;
}

std::string printable_excerpt(std::string_view text, std::size_t max_chars) {
  std::string out;
  for (const char c : text.substr(0, max_chars)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  if (text.size() > max_chars) out += "...";
  return out;
}

}  // namespace fragscope::inputs
