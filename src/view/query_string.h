#pragma once
/// @file query_string.h
/// @brief The parameters of a request's query (`a=1&b=x%3Ay`), read strictly: every key known,
/// none twice, numbers in range, percent-escapes well formed. A request the page never sends is
/// refused with the reason, not guessed at.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace fragscope::view {

class QueryString {
 public:
  /// @throws InputError (the reason, one line) on a malformed query, an unknown or repeated key.
  QueryString(std::string_view query, const std::set<std::string, std::less<>>& known_keys);

  bool has(std::string_view key) const { return values_.find(key) != values_.end(); }
  /// @brief The decoded value, or `fallback` when absent.
  std::string text(std::string_view key, std::string fallback = {}) const;
  /// @brief The value as an integer in [min, max]; `fallback` when absent (nullopt: required).
  /// @throws InputError when missing and required, not a decimal integer, or out of range.
  std::uint64_t number(std::string_view key, std::uint64_t min, std::uint64_t max,
                       std::optional<std::uint64_t> fallback = std::nullopt) const;

 private:
  std::map<std::string, std::string, std::less<>> values_;
};

}  // namespace fragscope::view
