#include "util/toml_key_depth.h"

#include <fmt/format.h>

#include "util/error.h"

namespace fragscope {
namespace {

bool is_bare_key_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

}  // namespace

void refuse_deep_toml_keys(std::string_view text, std::string_view source) {
  std::size_t line_number = 1;
  std::size_t dots = 0;          // in the chain of parts being read
  bool after_part = false;       // the last token was a part (bare or quoted), whitespace aside
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '\n' || c == '#') {  // a dotted key never spans lines; a comment runs to the line's end
      while (i < text.size() && text[i] != '\n') ++i;
      ++line_number, ++i;
      dots = 0, after_part = false;
    } else if (c == '"' || c == '\'') {  // a quoted part (or a string value), up to its closing quote on the line
      std::size_t j = i + 1;
      while (j < text.size() && text[j] != c && text[j] != '\n') j += (c == '"' && text[j] == '\\') ? 2 : 1;
      if (after_part) dots = 0;
      after_part = true;
      i = j < text.size() && text[j] == c ? j + 1 : j;
    } else if (is_bare_key_char(c)) {
      while (i < text.size() && is_bare_key_char(text[i])) ++i;
      if (after_part) dots = 0;  // two parts without a dot between them: not one key
      after_part = true;
    } else if (c == '.') {
      if (after_part && ++dots + 1 > kMaxTomlKeyParts) {
        throw InputError(fmt::format("{}: line {}: a dotted key or table header of more than {} parts", source,
                                     line_number, kMaxTomlKeyParts));
      }
      after_part = false;
      ++i;
    } else {
      if (c != ' ' && c != '\t') dots = 0, after_part = false;
      ++i;
    }
  }
}

}  // namespace fragscope
