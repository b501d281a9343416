#pragma once
/// @file memory_summary_reader.h
/// @brief Reads the table printed by `torch.cuda.memory_summary()`.
///
/// The summary rounds: sizes are printed in the unit chosen by the row's "all" figure and
/// truncated (`sz //= 1024`), counts above 750 000 in K / M. Each cell therefore keeps its
/// printed value and unit, and says which exact memory_stats values it is consistent with.
/// Rows map back to memory_stats names ("GPU reserved memory" / "from large pool" →
/// "reserved_bytes.large_pool"). Thread-safety: plain values and pure functions.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fragscope::inputs {

/// @brief One printed figure: `value` units of `unit` bytes (or counts), truncated.
struct SummaryCell {
  std::uint64_t value = 0;
  std::uint64_t unit = 1;
  /// @brief True when `exact` prints as this cell (value·unit ≤ exact < (value+1)·unit).
  bool matches(std::int64_t exact) const;
};

struct SummaryRow {
  std::size_t line = 0;
  std::string metric;    ///< the table's label: "GPU reserved memory"
  std::string pool;      ///< "all", "large_pool", "small_pool"; empty for oversize rows
  std::string stat_key;  ///< memory_stats prefix: "reserved_bytes.large_pool", "oversize_segments"
  bool bytes = false;    ///< sizes (true) or counts
  SummaryCell current, peak, allocated, freed;
};

struct MemorySummary {
  std::optional<int> device;  ///< "device ID 0"
  std::optional<std::int64_t> num_ooms;           ///< "CUDA OOMs: N"
  std::optional<std::int64_t> num_alloc_retries;  ///< "cudaMalloc retries: N"
  std::vector<SummaryRow> rows;

  /// @brief The row for a memory_stats prefix ("allocated_bytes.all"), or nullptr.
  const SummaryRow* find(std::string_view stat_key) const;
};

/// @brief Parses summary text (a log around it is fine: only the table's lines are read).
/// @throws InputError "SOURCE:LINE: ..." on an unreadable cell; "SOURCE: no memory_summary
/// table" when there is none.
MemorySummary parse_memory_summary(std::string_view text, std::string_view source);

/// @brief Reads the file at `path`.
MemorySummary read_memory_summary_file(const std::filesystem::path& path);

}  // namespace fragscope::inputs
