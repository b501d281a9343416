#include "cli/flag_checks.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include <fmt/format.h>

#include "util/bytes.h"
#include "util/error.h"

namespace fragscope::cli {
namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

bool has_unit(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return !text.empty() && !std::isdigit(static_cast<unsigned char>(text.back())) && text.back() != '.';
}

/// What is wrong with `text` as a size, or "".
std::string size_problem(const std::string& text) {
  if (!has_unit(text)) {
    const std::optional<std::uint64_t> count = parse_bytes(text);
    if (count && *count >= kMiB) {  // too large to be GiB: most likely bytes
      return fmt::format("'{}' has no unit: write {}B if you mean bytes ({})", text, text, format_bytes(*count));
    }
    return fmt::format("'{}' has no unit: write {}GiB (binary, 2^30 bytes) or {}GB (decimal, 10^9 bytes)", text, text,
                       text);
  }
  const auto bytes = parse_bytes(text);
  if (!bytes || *bytes == 0) {
    return fmt::format("'{}' is not a size: give a number and a unit, e.g. 40GiB, 40GB, 512MiB", text);
  }
  return {};
}

}  // namespace

CLI::Validator whole_number(std::uint64_t min, std::uint64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        std::uint64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (text.empty() || ec != std::errc() || ptr != end || value < min || value > max) {
          return fmt::format("'{}' is not allowed: give a whole number from {} to {}", text, min, max);
        }
        return {};
      },
      "");
}

CLI::Validator number_between(double min, double max, std::string_view unit) {
  return CLI::Validator(
      [min, max, unit = std::string(unit)](std::string& text) -> std::string {
        double value = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (text.empty() || ec != std::errc() || ptr != end || !(value >= min && value <= max)) {
          return fmt::format("'{}' is not allowed: give {} from {:g} to {:g}", text, unit, min, max);
        }
        return {};
      },
      "");
}

CLI::Validator size_value() {
  return CLI::Validator([](std::string& text) { return size_problem(text); }, "");
}

std::optional<std::uint64_t> parse_size_flag(const std::string& text, std::string_view flag) {
  if (text.empty()) return std::nullopt;
  if (const std::string problem = size_problem(text); !problem.empty()) {
    throw InputError(fmt::format("{}: {}", flag, problem));
  }
  return parse_bytes(text);
}

std::string alloc_conf_value(std::string text) {
  const std::string name = lower(text);
  return name == "default" || name == "defaults" ? std::string() : text;
}

}  // namespace fragscope::cli
