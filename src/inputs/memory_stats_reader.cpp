#include "inputs/memory_stats_reader.h"

#include <algorithm>
#include <limits>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "inputs/json_input.h"
#include "inputs/text_file.h"
#include "util/error.h"

namespace fragscope::inputs {

namespace {

using Values = std::map<std::string, std::int64_t, std::less<>>;

// Nesting deeper than statistic.pool.counter is not memory_stats; the limit also bounds recursion.
constexpr int kMaxDepth = 4;

std::int64_t integer_value(const nlohmann::json& value, const std::string& key,
                           std::string_view source) {
  if (value.is_number_integer()) {
    if (value.is_number_unsigned() &&
        value.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      throw InputError(fmt::format("{}: value of \"{}\" is out of range", source, key));
    return value.get<std::int64_t>();
  }
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (d == static_cast<double>(static_cast<std::int64_t>(d))) return static_cast<std::int64_t>(d);
  }
  throw InputError(fmt::format("{}: value of \"{}\" is not an integer ({})", source, key,
                               value.type_name()));
}

void flatten(const nlohmann::json& object, const std::string& prefix, int depth,
             std::string_view source, Values& out) {
  for (const auto& [name, value] : object.items()) {
    const std::string key = prefix.empty() ? name : prefix + "." + name;
    if (value.is_object()) {
      if (depth + 1 >= kMaxDepth)
        throw InputError(fmt::format("{}: \"{}\" is nested too deeply for memory_stats", source, key));
      flatten(value, key, depth + 1, source, out);
    } else {
      out[key] = integer_value(value, key, source);
    }
  }
}

}  // namespace

MemoryStats parse_memory_stats(std::string_view json_text, std::string_view source) {
  const nlohmann::json document = parse_json_object(json_text, source, "memory_stats");
  Values values;
  flatten(document, "", 0, source, values);
  const bool has_stat = std::any_of(values.begin(), values.end(), [](const auto& kv) {
    return kv.first.starts_with("allocated_bytes.") || kv.first.starts_with("reserved_bytes.") ||
           kv.first.starts_with("num_");
  });
  if (!has_stat)
    throw InputError(fmt::format("{}: no memory_stats keys (allocated_bytes.*, reserved_bytes.*, "
                                 "num_*) in this JSON object",
                                 source));
  return memory_stats_from_values(std::move(values));
}

MemoryStats read_memory_stats_file(const std::filesystem::path& path) {
  return parse_memory_stats(read_text_file(path, kMaxMemoryStatsBytes, "a memory_stats JSON"), path.string());
}

}  // namespace fragscope::inputs
