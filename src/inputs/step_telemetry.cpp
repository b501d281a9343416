#include "inputs/step_telemetry.h"

#include <unordered_set>

#include <fmt/format.h>

#include "util/shown_text.h"

namespace fragscope::inputs {

std::optional<double> data_wait_fraction(std::span<const StepRecord> records) {
  DataWaitSums sums;
  sums.add(records);
  return sums.fraction();
}

void DataWaitSums::add(std::span<const StepRecord> records) {
  for (const auto& record : records) {
    wait += record.data_wait_ms;
    total += record.data_wait_ms + record.compute_ms;
  }
}

std::optional<double> DataWaitSums::fraction() const {
  if (!(total > 0)) return std::nullopt;
  return wait / total;
}

std::size_t telemetry_footprint(std::span<const StepRecord> records) {
  std::size_t bytes = 0;
  std::unordered_set<const void*> texts;
  const auto count = [&](const SharedText& text) {
    if (texts.insert(text.identity()).second) bytes += text.text_bytes();
  };
  for (const StepRecord& record : records) {
    bytes += sizeof(StepRecord) + record.heap_bytes();
    count(record.phase);
    for (const auto& field : record.memory_stats) count(field.name);
    for (const auto& field : record.extra) count(field.name);
  }
  return bytes;
}

bool is_memory_stats_key(std::string_view key) {
  return key.find('.') != std::string_view::npos || key.starts_with("num_") ||
         key == "max_split_size";
}

std::string phase_name_problem(std::string_view name) {
  if (one_line_safe(name) != name) return "a name without control characters";
  if (name.size() > kMaxPhaseBytes) return fmt::format("a name of at most {} bytes", kMaxPhaseBytes);
  return "";
}

}  // namespace fragscope::inputs
