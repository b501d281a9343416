#include "util/bytes.h"

#include <charconv>
#include <cmath>
#include <fmt/format.h>

namespace fragscope {

std::string format_bytes(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < kKiB) return fmt::format("{} bytes", bytes);
  double value = static_cast<double>(bytes) / 1024.0;
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.2f} {}", value, kUnits[unit]);
}

std::string format_signed_bytes(std::int64_t bytes) {
  if (bytes >= 0) return format_bytes(static_cast<std::uint64_t>(bytes));
  return "-" + format_bytes(static_cast<std::uint64_t>(-(bytes + 1)) + 1);
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<double> unit_multiplier(std::string_view unit) {
  struct Unit {
    std::string_view name;
    double factor;
  };
  static constexpr Unit kUnits[] = {
      {"", 1},           {"B", 1},          {"bytes", 1},      {"byte", 1},
      {"KiB", 1024.0},   {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
      {"KB", 1e3},       {"MB", 1e6},       {"GB", 1e9},       {"TB", 1e12},
      {"K", 1024.0},     {"M", 1048576.0},  {"G", 1073741824.0}, {"T", 1099511627776.0},
  };
  for (const auto& u : kUnits)
    if (u.name == unit) return u.factor;
  return std::nullopt;
}

}  // namespace

std::optional<std::uint64_t> parse_bytes(std::string_view text) {
  text = trim(text);
  if (text.empty()) return std::nullopt;
  std::size_t end = 0;
  while (end < text.size() && ((text[end] >= '0' && text[end] <= '9') || text[end] == '.')) ++end;
  if (end == 0) return std::nullopt;
  double number = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + end, number);
  if (ec != std::errc() || ptr != text.data() + end) return std::nullopt;
  auto factor = unit_multiplier(trim(text.substr(end)));
  if (!factor) return std::nullopt;
  double bytes = std::round(number * *factor);
  if (!(bytes >= 0) || bytes > 1.8e19) return std::nullopt;
  return static_cast<std::uint64_t>(bytes);
}

}  // namespace fragscope
