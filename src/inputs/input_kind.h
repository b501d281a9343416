#pragma once
/// @file input_kind.h
/// @brief Tells what a file is from its content, never its name, so the doctor can take a
/// folder of files named anything.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>

namespace fragscope::inputs {

enum class InputKind : std::uint8_t {
  kSnapshotPickle,     ///< `_dump_snapshot()` pickle: raw, gzip or zstd
  kMemoryStatsJson,    ///< `torch.cuda.memory_stats()` as JSON
  kTelemetryJsonl,     ///< step telemetry, one JSON object per line
  kNvidiaSmiCsv,       ///< `nvidia-smi --query-gpu=... --format=csv`
  kMemorySummaryText,  ///< `torch.cuda.memory_summary()`
  kOomLog,             ///< a training log holding a failure the doctor reads (training_log.h)
  kUnknown,
};

/// @brief "snapshot-pickle", "memory-stats", "telemetry", "nvidia-smi", "memory-summary",
/// "oom-log", "unknown".
std::string_view to_string(InputKind kind);

/// @brief Bytes from the start of a file that detection looks at.
inline constexpr std::size_t kInputKindHeadBytes = 64 * 1024;

/// @brief Classifies the first bytes of an input (up to kInputKindHeadBytes are used).
/// Compressed inputs are recognised by magic (gzip 1f 8b, zstd 28 b5 2f fd) and count as a
/// pickle only when their first decompressed byte is the pickle PROTO opcode (0x80).
/// Never throws on any content.
InputKind detect_input_kind(std::span<const std::uint8_t> head);

/// @brief Classifies the file at `path`; a text file not recognised from its head is scanned
/// whole (streamed, any size) for an OOM message.
/// @throws InputError naming `path` when it cannot be read or is a special file (input_file.h).
InputKind detect_input_kind_file(const std::filesystem::path& path);

}  // namespace fragscope::inputs
