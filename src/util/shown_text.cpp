#include "util/shown_text.h"

#include <cstddef>
#include <cstdint>
#include <utility>

namespace fragscope {
namespace {

constexpr std::uint32_t kInvalid = 0xffffffffu;

/// The code point of the UTF-8 sequence at `text[at]` and its length in bytes; kInvalid and 1 for a byte that
/// begins no valid sequence (a stray continuation, an overlong form, a surrogate, past U+10FFFF, cut short).
std::pair<std::uint32_t, std::size_t> decode(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[at + i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return {lead, 1};
  const std::size_t length = lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3
                             : lead >= 0xf0 && lead <= 0xf4                                  ? 4
                                                                                              : 0;
  if (length == 0 || at + length > text.size()) return {kInvalid, 1};
  std::uint32_t code = lead & (0x7f >> length);
  for (std::size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xc0) != 0x80) return {kInvalid, 1};
    code = (code << 6) | (byte(i) & 0x3f);
  }
  const bool overlong = (length == 3 && code < 0x800) || (length == 4 && code < 0x10000);
  if (overlong || (code >= 0xd800 && code <= 0xdfff) || code > 0x10ffff) return {kInvalid, 1};
  return {code, length};
}

bool is_control(std::uint32_t code) {
  return (code < 0x20 && code != '\n' && code != '\t') || (code >= 0x7f && code <= 0x9f);
}

/// Bidirectional marks, embeddings, overrides and isolates, and the line and paragraph separators.
bool is_format_control(std::uint32_t code) {
  return code == 0x061c || code == 0x200e || code == 0x200f || (code >= 0x2028 && code <= 0x202e) ||
         (code >= 0x2066 && code <= 0x2069);
}

/// What would act on a terminal or break a line: controls (newline and tab too) and format controls.
bool breaks_one_line(std::uint32_t code) {
  return code == '\n' || code == '\t' || is_control(code) || is_format_control(code);
}

bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xc0) == 0x80; }

constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD

/// `text` with `mark` for each code point `unshown` picks and for each byte that begins no valid sequence.
template <typename Unshown>
std::string replace_unshown(std::string_view text, std::string_view mark, Unshown unshown) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    const auto [code, length] = decode(text, at);
    if (code == kInvalid || unshown(code)) out += mark;
    else out.append(text.substr(at, length));
    at += length;
  }
  return out;
}

}  // namespace

std::string shown_name(std::string_view text, std::size_t max_bytes) {
  std::string cut(text);
  if (text.size() > max_bytes) {
    std::size_t head = max_bytes / 2;
    std::size_t tail = text.size() - (max_bytes - head);
    while (head > 0 && is_continuation(text[head])) --head;
    while (tail < text.size() && is_continuation(text[tail])) ++tail;
    cut = std::string(text.substr(0, head)) + "\u2026" + std::string(text.substr(tail));
  }
  return one_line_safe(cut);
}

std::string one_line_safe(std::string_view text) { return replace_unshown(text, "?", breaks_one_line); }

std::string terminal_safe(std::string_view text) {
  return replace_unshown(text, "?", [](std::uint32_t code) { return is_control(code) || is_format_control(code); });
}

std::string printable_text(std::string_view raw) {
  return replace_unshown(raw, kReplacement, breaks_one_line);
}

std::string valid_utf8(std::string_view text) {
  return replace_unshown(text, kReplacement,
                         [](std::uint32_t code) { return code < 0x20 && code != '\n' && code != '\t'; });
}

}  // namespace fragscope
