#pragma once
/// @file nvidia_smi_csv.h
/// @brief Reads `nvidia-smi --query-gpu=... --format=csv[,nounits]` output: one reading
/// (smi.csv) or a sampled trace (`-lms 100`, smi_trace.csv), one or many GPUs.
///
/// Columns are found by the header's names, in any order and any subset; units come from the
/// values ("51189 MiB", "77 %") or, with `nounits`, from the header ("memory.used [MiB]").
/// "[N/A]" / "[Not Supported]" values read as absent. GPUs are told apart by the `index` column;
/// without one, rows sharing a timestamp are GPUs 0, 1, ... in order (nvidia-smi prints every
/// GPU of a sample with the same timestamp), otherwise every row is GPU 0.
/// Thread-safety: plain values and pure functions.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fragscope::inputs {

struct SmiSample {
  std::size_t line = 0;  ///< 1-based line in its source
  int gpu = 0;           ///< `index` column, or inferred (see file comment)
  std::optional<std::string> timestamp;  ///< as printed: "2026/11/29 10:36:32.823"
  std::optional<double> time_s;          ///< the timestamp in seconds (wall clock, no zone)
  std::optional<std::uint64_t> memory_used;
  std::optional<std::uint64_t> memory_free;
  std::optional<std::uint64_t> memory_total;
  std::optional<double> utilization_gpu;  ///< percent, 0–100
  /// Every other queried column: header name without unit → value as printed.
  std::map<std::string, std::string, std::less<>> other;
};

struct SmiTable {
  std::string source;
  std::vector<std::string> columns;  ///< query names in header order ("memory.used", ...)
  std::vector<SmiSample> samples;    ///< in file order
};

/// @brief Parses CSV text; `source` names it in errors.
/// @throws InputError "SOURCE:LINE: ..." on a missing header (e.g. `noheader` output), a row
/// with the wrong number of fields or an unreadable number; "SOURCE: no samples" when empty.
SmiTable parse_nvidia_smi_csv(std::string_view csv, std::string_view source);

/// @brief Reads the file at `path`.
SmiTable read_nvidia_smi_csv_file(const std::filesystem::path& path);

/// @brief "2026/11/29 10:36:32.823" → seconds since 1970 (read as UTC); nullopt otherwise.
std::optional<double> parse_smi_timestamp(std::string_view text);

}  // namespace fragscope::inputs
