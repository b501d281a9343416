#pragma once
/// @file rank_file_reader.h
/// @brief Reads rank files (docs/rank-file.md) without ever using a torn or foreign record.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "agent/rank_record.h"

namespace fragscope::agent {

/// @brief What one rank file turned out to be. Only kOk readings carry a usable record.
enum class RankFileState { kOk, kTorn, kInvalid, kUnsupported, kStale };

/// @brief Label value for a state: "ok", "torn", "invalid", "unsupported", "stale".
const char* state_name(RankFileState state);

/// @brief One file's outcome; `problem` is one line explaining any state but kOk.
struct RankFileReading {
  std::filesystem::path path;
  RankFileState state = RankFileState::kInvalid;
  std::string problem;
  RankRecord record;  ///< meaningful for kOk and kStale only
};

/// @brief Decodes a stable copy of a rank file: checks magic, version, size and CRC.
/// Never returns kTorn or kStale (those need the sequence lock and the clock); an odd `seq`
/// in the copy is reported as kTorn by read_rank_file, not here.
RankFileReading decode_rank_file(std::span<const std::byte> bytes);

/// @brief Reads one rank file under its sequence lock (pread, never mmap: a file truncated
/// under the reader cannot fault it).
///
/// Retries up to `attempts` times while `seq` is odd or moving; a writer killed mid-update
/// therefore yields kTorn after those attempts. Refuses anything but a regular file (no FIFO
/// can block it). Thread-safe; touches nothing but the file.
RankFileReading read_rank_file(const std::filesystem::path& path, int attempts = 4);

/// @brief At most this many rank files are read per scan, so a flooded directory cannot stall
/// the agent; the rest are ignored until the directory shrinks.
inline constexpr std::size_t kMaxRankFiles = 4096;

/// @brief Reads every `*.fsr` file of `directory` (a missing directory has none) and marks
/// valid records older than `stale_after` (by their update_unix_ns against `now_unix_ns`)
/// as kStale. Readings come sorted by path.
std::vector<RankFileReading> scan_rank_directory(const std::filesystem::path& directory,
                                                 std::uint64_t now_unix_ns,
                                                 std::chrono::nanoseconds stale_after);

}  // namespace fragscope::agent
