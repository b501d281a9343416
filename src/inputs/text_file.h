#pragma once
/// @file text_file.h
/// @brief How much of each artifact the text readers accept, and the whole-file read they share.
///
/// Every input is opened by util/input_file.h (regular files and pipes only; devices, sockets,
/// directories and /proc files are refused with a one-line error) and read against the cap of
/// its kind, so a device, an endless pipe or a huge file costs at most that cap in memory. Logs
/// and steps.jsonl are streamed line by line instead (oom_message_parser.h, telemetry_reader.h).

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "util/bytes.h"

namespace fragscope::inputs {

/// @brief Caps per artifact kind: real ones are far smaller (docs/inputs.md lists typical sizes).
inline constexpr std::uint64_t kMaxMemoryStatsBytes = 64 * kMiB;    ///< memory_stats JSON (~20 KiB)
inline constexpr std::uint64_t kMaxMemorySummaryBytes = 16 * kMiB;  ///< memory_summary text (~5 KiB)
inline constexpr std::uint64_t kMaxNvidiaSmiBytes = 512 * kMiB;     ///< 8 GPUs every 100 ms for 8 h: ~230 MiB
inline constexpr std::uint64_t kMaxCriteriaBytes = 1 * kMiB;        ///< acceptance criteria (~1 KiB)
inline constexpr std::uint64_t kMaxTelemetryBytes = 1 * kGiB;       ///< steps.jsonl (~1 KiB a step)
inline constexpr std::uint64_t kMaxTelemetryLineBytes = 16 * kMiB;  ///< one steps.jsonl record
inline constexpr std::uint64_t kMaxLogLineBytes = 64 * kKiB;        ///< a log line is cut here when scanned

/// @brief The bytes of `path`, at most `max_bytes`; `what` names the artifact in the error.
/// @throws InputError as open_input (util/input_file.h), or "PATH: larger than the SIZE WHAT may
/// have" past the cap.
std::string read_text_file(const std::filesystem::path& path, std::uint64_t max_bytes, std::string_view what);

/// @brief `text` made safe to quote in a one-line error: bytes outside printable ASCII become
/// '?', and text longer than `max_chars` is cut with "...".
std::string printable_excerpt(std::string_view text, std::size_t max_chars = 60);

}  // namespace fragscope::inputs
