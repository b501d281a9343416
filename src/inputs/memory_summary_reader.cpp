#include "inputs/memory_summary_reader.h"

#include <array>
#include <charconv>

#include <fmt/format.h>

#include "inputs/text_file.h"
#include "util/error.h"

namespace fragscope::inputs {

namespace {

struct MetricName {
  std::string_view label;
  std::string_view stat;
  bool pooled;
};

constexpr std::array<MetricName, 11> kMetrics = {{
    {"Allocated memory", "allocated_bytes", true},
    {"Active memory", "active_bytes", true},
    {"Requested memory", "requested_bytes", true},
    {"GPU reserved memory", "reserved_bytes", true},
    {"Non-releasable memory", "inactive_split_bytes", true},
    {"Allocations", "allocation", true},
    {"Active allocs", "active", true},
    {"GPU reserved segments", "segment", true},
    {"Non-releasable allocs", "inactive_split", true},
    {"Oversize allocations", "oversize_allocations", false},
    {"Oversize GPU segments", "oversize_segments", false},
}};

struct UnitName {
  std::string_view name;
  std::uint64_t factor;
  bool bytes;
};

// Old summaries (PyTorch 1.x) printed binary multiples as "KB", "MB", ...
constexpr std::array<UnitName, 14> kUnits = {{
    {"B", 1, true},
    {"KiB", 1ull << 10, true}, {"MiB", 1ull << 20, true}, {"GiB", 1ull << 30, true},
    {"TiB", 1ull << 40, true}, {"PiB", 1ull << 50, true},
    {"KB", 1ull << 10, true},  {"MB", 1ull << 20, true},  {"GB", 1ull << 30, true},
    {"TB", 1ull << 40, true},  {"PB", 1ull << 50, true},
    {"", 1, false},            {"K", 1000, false},        {"M", 1000000, false},
}};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_cells(std::string_view line) {
  std::vector<std::string_view> cells;
  line = trim(line);
  if (!line.starts_with('|')) return cells;
  line.remove_prefix(1);
  while (!line.empty()) {
    const auto bar = line.find('|');
    if (bar == std::string_view::npos) break;
    cells.push_back(trim(line.substr(0, bar)));
    line.remove_prefix(bar + 1);
  }
  return cells;
}

std::optional<std::pair<SummaryCell, bool>> parse_cell(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return std::nullopt;
  SummaryCell cell;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + digits, cell.value);
  if (ec != std::errc()) return std::nullopt;
  const auto unit = trim(text.substr(digits));
  for (const auto& u : kUnits) {
    if (u.name == unit) {
      cell.unit = u.factor;
      return std::pair{cell, u.bytes};
    }
  }
  return std::nullopt;
}

std::optional<std::int64_t> counter_after(std::string_view line, std::string_view label) {
  const auto at = line.find(label);
  if (at == std::string_view::npos) return std::nullopt;
  auto rest = trim(line.substr(at + label.size()));
  std::int64_t value = 0;
  const auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
  if (ec != std::errc()) return std::nullopt;
  return value;
}

// The snapshot reader's bound on a device index (a node has far fewer GPUs).
constexpr std::int64_t kMaxDeviceId = 4096;

// "device ID N", range-checked before it is narrowed to int: 4294967297 is not device 1.
std::optional<int> device_id_after(std::string_view line, std::string_view source, std::size_t line_no) {
  auto rest = trim(line.substr(line.find("device ID") + std::string_view("device ID").size()));
  std::size_t length = !rest.empty() && rest.front() == '-' ? 1 : 0;
  while (length < rest.size() && rest[length] >= '0' && rest[length] <= '9') ++length;
  const auto text = rest.substr(0, length);
  std::int64_t id = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec == std::errc::invalid_argument) return std::nullopt;  // no number: the device stays unknown
  if (ec != std::errc() || id < 0 || id > kMaxDeviceId) {
    throw InputError(fmt::format("{}:{}: device ID {} out of range (0 to {})", source, line_no,
                                 printable_excerpt(text), kMaxDeviceId));
  }
  return static_cast<int>(id);
}

}  // namespace

bool SummaryCell::matches(std::int64_t exact) const {
  if (exact < 0) return false;
  const auto e = static_cast<std::uint64_t>(exact);
  return e / unit == value;
}

const SummaryRow* MemorySummary::find(std::string_view stat_key) const {
  for (const auto& row : rows)
    if (row.stat_key == stat_key) return &row;
  return nullptr;
}

MemorySummary parse_memory_summary(std::string_view text, std::string_view source) {
  MemorySummary summary;
  const MetricName* metric = nullptr;
  std::size_t line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto end = text.find('\n', pos);
    const auto line = text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    pos = end == std::string_view::npos ? text.size() : end + 1;
    ++line_no;
    if (const auto at = line.find("memory summary, device ID"); at != std::string_view::npos) {
      if (auto id = device_id_after(line, source, line_no)) summary.device = id;
      continue;
    }
    if (line.find("CUDA OOMs:") != std::string_view::npos) {
      summary.num_ooms = counter_after(line, "CUDA OOMs:");
      summary.num_alloc_retries = counter_after(line, "cudaMalloc retries:");
      continue;
    }
    const auto cells = split_cells(line);
    if (cells.size() != 5) continue;
    std::string_view pool;
    if (cells[0] == "from large pool") {
      pool = "large_pool";
    } else if (cells[0] == "from small pool") {
      pool = "small_pool";
    } else {
      metric = nullptr;
      for (const auto& m : kMetrics)
        if (m.label == cells[0]) metric = &m;
      if (!metric) continue;  // the "Metric | Cur Usage | ..." heading
      pool = metric->pooled ? "all" : "";
    }
    if (!metric) continue;
    SummaryRow row;
    row.line = line_no;
    row.metric = std::string(metric->label);
    row.pool = std::string(pool);
    row.stat_key = pool.empty() ? std::string(metric->stat) : fmt::format("{}.{}", metric->stat, pool);
    SummaryCell* targets[] = {&row.current, &row.peak, &row.allocated, &row.freed};
    for (std::size_t i = 0; i < 4; ++i) {
      const auto parsed = parse_cell(cells[i + 1]);
      if (!parsed)
        throw InputError(fmt::format("{}:{}: cannot read \"{}\" in the {} row", source, line_no,
                                     printable_excerpt(cells[i + 1]), row.metric));
      *targets[i] = parsed->first;
      row.bytes = row.bytes || parsed->second;
    }
    summary.rows.push_back(std::move(row));
  }
  if (summary.rows.empty())
    throw InputError(fmt::format("{}: no memory_summary table (torch.cuda.memory_summary() output)", source));
  return summary;
}

MemorySummary read_memory_summary_file(const std::filesystem::path& path) {
  return parse_memory_summary(read_text_file(path, kMaxMemorySummaryBytes, "a memory_summary"), path.string());
}

}  // namespace fragscope::inputs
