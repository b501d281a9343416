#include "agent/printable_text.h"

namespace fragscope::agent {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool is_continuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

/// Length of the valid UTF-8 sequence at the start of `text`, 0 when there is none (RFC 3629:
/// no overlong forms, no surrogates, nothing past U+10FFFF).
std::size_t sequence_length(std::string_view text) {
  const auto at = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = at(0);
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  unsigned char second_min = 0x80, second_max = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_min = 0xA0;
    if (lead == 0xED) second_max = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_min = 0x90;
    if (lead == 0xF4) second_max = 0x8F;
  } else {
    return 0;
  }
  if (text.size() < length || at(1) < second_min || at(1) > second_max) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if (!is_continuation(at(i))) return 0;
  }
  return length;
}

bool is_control(std::string_view sequence) {
  const auto lead = static_cast<unsigned char>(sequence[0]);
  if (sequence.size() == 1) return lead < 0x20 || lead == 0x7F;
  return lead == 0xC2 && static_cast<unsigned char>(sequence[1]) < 0xA0;  // U+0080..U+009F
}

}  // namespace

std::string printable_text(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  while (!raw.empty()) {
    const std::size_t length = sequence_length(raw);
    if (length == 0 || is_control(raw.substr(0, length))) {
      out += kReplacement;
      raw.remove_prefix(length == 0 ? 1 : length);
    } else {
      out += raw.substr(0, length);
      raw.remove_prefix(length);
    }
  }
  return out;
}

}  // namespace fragscope::agent
