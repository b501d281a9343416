#include "inputs/nvidia_smi_csv.h"

#include <cctype>
#include <charconv>
#include <cstdint>

#include <fmt/format.h>

#include "inputs/text_file.h"
#include "util/bytes.h"
#include "util/error.h"

namespace fragscope::inputs {

namespace {

struct Column {
  std::string name;  // "memory.used"
  std::string unit;  // "MiB", "%", or empty
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (true) {
    const auto comma = line.find(',', start);
    fields.push_back(trim(line.substr(start, comma == std::string_view::npos ? std::string_view::npos
                                                                              : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return fields;
}

Column parse_header_field(std::string_view field) {
  Column column;
  const auto open = field.find('[');
  if (open != std::string_view::npos && field.back() == ']') {
    column.name = std::string(trim(field.substr(0, open)));
    column.unit = std::string(trim(field.substr(open + 1, field.size() - open - 2)));
  } else {
    column.name = std::string(field);
  }
  return column;
}

// nvidia-smi query names are lower-case with dots and underscores, units in brackets:
// "memory.used [MiB]". Anything else (data rows of `noheader` output, binary) is not a header.
bool looks_like_header(const std::vector<std::string_view>& fields) {
  for (auto field : fields) {
    if (const auto open = field.find(" ["); open != std::string_view::npos && field.back() == ']')
      field = field.substr(0, open);
    if (field.empty() || !(field.front() >= 'a' && field.front() <= 'z')) return false;
    for (const char c : field)
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_')) return false;
  }
  return true;
}

bool not_available(std::string_view value) {
  return value.empty() || value == "N/A" || (value.front() == '[' && value.back() == ']');
}

std::optional<int> parse_index(std::string_view text) {
  int value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

std::optional<double> parse_percent(std::string_view text) {
  if (text.ends_with('%')) text = trim(text.substr(0, text.size() - 1));
  double value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || value < 0 || value > 100)
    return std::nullopt;
  return value;
}

std::optional<std::uint64_t> parse_memory(std::string_view text, const std::string& header_unit) {
  if (!text.empty() && std::isdigit(static_cast<unsigned char>(text.back())) && !header_unit.empty())
    return parse_bytes(fmt::format("{} {}", text, header_unit));  // nounits
  return parse_bytes(text);
}

// Howard Hinnant's days_from_civil: days since 1970-01-01 of a proleptic Gregorian date.
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

}  // namespace

std::optional<double> parse_smi_timestamp(std::string_view text) {
  // YYYY/MM/DD HH:MM:SS[.fff]
  int year = 0, month = 0, day = 0, hour = 0, minute = 0;
  double second = 0;
  auto number = [&text](auto& out, std::size_t len, char sep) {
    if (text.size() < len) return false;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + len, out);
    if (ec != std::errc() || ptr != text.data() + len) return false;
    text.remove_prefix(len);
    if (sep) {
      if (text.empty() || text.front() != sep) return false;
      text.remove_prefix(1);
    }
    return true;
  };
  if (!number(year, 4, '/') || !number(month, 2, '/') || !number(day, 2, ' ') ||
      !number(hour, 2, ':') || !number(minute, 2, ':'))
    return std::nullopt;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), second);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second >= 61)
    return std::nullopt;
  const auto days = days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  return static_cast<double>(days) * 86400.0 + hour * 3600.0 + minute * 60.0 + second;
}

SmiTable parse_nvidia_smi_csv(std::string_view csv, std::string_view source) {
  SmiTable table;
  table.source = std::string(source);
  std::vector<Column> columns;
  std::string_view header_line;
  std::size_t line_no = 0;
  std::size_t pos = 0;
  std::optional<std::string> previous_timestamp;
  int position_in_timestamp = 0;
  bool has_index = false;
  while (pos < csv.size()) {
    const auto end = csv.find('\n', pos);
    const bool last = end == std::string_view::npos;
    const std::string_view line = trim(csv.substr(pos, last ? std::string_view::npos : end - pos));
    pos = last ? csv.size() : end + 1;
    ++line_no;
    if (line.empty()) continue;
    const auto fields = split_fields(line);
    if (columns.empty()) {
      if (!looks_like_header(fields))
        throw InputError(fmt::format(
            "{}:{}: no nvidia-smi header line (output of --format=csv,noheader cannot be read: "
            "its columns are unknown)",
            source, line_no));
      header_line = line;
      for (const auto field : fields) {
        columns.push_back(parse_header_field(field));
        table.columns.push_back(columns.back().name);
        has_index = has_index || columns.back().name == "index";
      }
      continue;
    }
    if (line == header_line) continue;  // repeated header
    if (fields.size() != columns.size()) {
      const bool truncated_tail = last || trim(csv.substr(pos)).empty();
      if (truncated_tail && fields.size() < columns.size()) break;  // writer killed mid-line
      throw InputError(fmt::format("{}:{}: {} fields where the header has {}", source, line_no,
                                   fields.size(), columns.size()));
    }
    SmiSample sample;
    sample.line = line_no;
    for (std::size_t i = 0; i < fields.size(); ++i) {
      const auto& column = columns[i];
      const auto value = fields[i];
      if (not_available(value)) continue;
      auto bad = [&]() -> InputError {
        return InputError(fmt::format("{}:{}: column {}: cannot read \"{}\"", source, line_no,
                                      column.name, printable_excerpt(value)));
      };
      if (column.name == "timestamp") {
        sample.timestamp = std::string(value);
        sample.time_s = parse_smi_timestamp(value);
      } else if (column.name == "index") {
        const auto index = parse_index(value);
        if (!index) throw bad();
        sample.gpu = *index;
      } else if (column.name == "memory.used" || column.name == "memory.free" ||
                 column.name == "memory.total") {
        const auto bytes = parse_memory(value, column.unit);
        if (!bytes) throw bad();
        (column.name == "memory.used"   ? sample.memory_used
         : column.name == "memory.free" ? sample.memory_free
                                        : sample.memory_total) = *bytes;
      } else if (column.name == "utilization.gpu") {
        sample.utilization_gpu = parse_percent(value);
        if (!sample.utilization_gpu) throw bad();
      } else {
        sample.other[column.name] = std::string(value);
      }
    }
    if (!has_index) {
      position_in_timestamp =
          (sample.timestamp && sample.timestamp == previous_timestamp) ? position_in_timestamp + 1 : 0;
      sample.gpu = position_in_timestamp;
      previous_timestamp = sample.timestamp;
    }
    table.samples.push_back(std::move(sample));
  }
  if (columns.empty() || table.samples.empty())
    throw InputError(fmt::format("{}: no nvidia-smi samples", source));
  return table;
}

SmiTable read_nvidia_smi_csv_file(const std::filesystem::path& path) {
  return parse_nvidia_smi_csv(read_text_file(path, kMaxNvidiaSmiBytes, "an nvidia-smi CSV"), path.string());
}

}  // namespace fragscope::inputs
