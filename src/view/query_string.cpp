#include "view/query_string.h"

#include <charconv>

#include <fmt/format.h>

#include "util/error.h"

namespace fragscope::view {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string decode(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out += ' ';
    } else if (text[i] == '%') {
      const bool whole = i + 2 < text.size();
      const int high = whole ? hex_digit(text[i + 1]) : -1;
      const int low = whole ? hex_digit(text[i + 2]) : -1;
      if (high < 0 || low < 0) throw InputError("malformed percent-escape in the query");
      out += static_cast<char>(high * 16 + low);
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace

QueryString::QueryString(std::string_view query, const std::set<std::string, std::less<>>& known_keys) {
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const auto equals = pair.find('=');
    const std::string key = decode(pair.substr(0, equals));
    if (!known_keys.contains(key)) throw InputError(fmt::format("unknown parameter '{}'", key));
    const std::string value = equals == std::string_view::npos ? "" : decode(pair.substr(equals + 1));
    if (!values_.emplace(key, value).second) throw InputError(fmt::format("parameter '{}' given twice", key));
  }
}

std::string QueryString::text(std::string_view key, std::string fallback) const {
  const auto it = values_.find(key);
  return it == values_.end() ? fallback : it->second;
}

std::uint64_t QueryString::number(std::string_view key, std::uint64_t min, std::uint64_t max,
                                  std::optional<std::uint64_t> fallback) const {
  const auto it = values_.find(key);
  if (it == values_.end()) {
    if (!fallback) throw InputError(fmt::format("parameter '{}' is required", key));
    return *fallback;
  }
  const std::string& text = it->second;
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    throw InputError(fmt::format("parameter '{}' is not a whole number", key));
  }
  if (value < min || value > max) {
    throw InputError(fmt::format("parameter '{}' is {}: outside [{}, {}]", key, value, min, max));
  }
  return value;
}

}  // namespace fragscope::view
