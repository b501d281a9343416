#pragma once
/// @file rank_file_reader.h
/// @brief Reads rank files (docs/rank-file.md) without ever using a torn or foreign record.

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
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
  std::string name;  ///< relative to the rank directory: "rank0-pid1.fsr" or "1000/rank0-pid1.fsr"
  uid_t owner_uid = 0;  ///< the file's owner (the user a checkpoint request is handed to)
  gid_t owner_gid = 0;
  RankFileState state = RankFileState::kInvalid;
  std::string problem;
  RankRecord record;  ///< meaningful for kOk and kStale only
};

/// @brief Decodes a stable copy of a rank file: checks magic, version, size and CRC; the job and
/// GPU UUID strings come out as printable UTF-8 (printable_text.h).
/// Never returns kTorn or kStale (those need the sequence lock and the clock); an odd `seq`
/// in the copy is reported as kTorn by read_rank_file, not here.
RankFileReading decode_rank_file(std::span<const std::byte> bytes);

/// @brief Reads the rank file `leaf` of the folder `folder_fd` under its sequence lock (pread,
/// never mmap: a file truncated under the reader cannot fault it).
///
/// Only a regular file is opened (checked before and after opening, without following a link):
/// no FIFO can block the agent, no device is touched. With `required_owner`, a file another
/// user owns is kInvalid. Retries up to `attempts` times while `seq` is odd or moving; a writer
/// killed mid-update therefore yields kTorn after those attempts. Thread-safe; touches nothing
/// but the file. `path` and `name` of the reading are left to the caller.
RankFileReading read_rank_file_at(int folder_fd, const std::string& leaf, std::optional<uid_t> required_owner,
                                  int attempts = 4);

/// @brief read_rank_file_at for a path: its folder is opened as given, the file without links.
RankFileReading read_rank_file(const std::filesystem::path& path, int attempts = 4);

/// @brief At most this many rank files of one owner are read per folder and scan, so a flooded
/// directory cannot stall the agent or hide another user's ranks; the owner's newest files
/// (by modification time) are kept, the rest dropped with a warning.
inline constexpr std::size_t kMaxRankFiles = 4096;

/// @brief At most this many per-user folders are read per scan.
inline constexpr std::size_t kMaxUserFolders = 1024;

/// @brief One scan of the rank directory.
struct RankScan {
  std::vector<RankFileReading> readings;  ///< sorted by name
  /// Checkpoint requests and their temp files seen (names as RankFileReading::name spells them),
  /// for ActionDispatcher::remove_requests_of_gone_ranks.
  std::vector<std::string> checkpoint_files;
  std::string problem;  ///< set when the rank directory itself cannot be read: nothing is reported
  std::vector<std::string> warnings;  ///< one line each: folders refused, files dropped over the cap
};

/// @brief Reads every rank file (`rank<R>-pid<P>.fsr`) at the top of `directory` and in its
/// per-user folders (rank_folder.h), and marks valid records older than `stale_after` (by their
/// update_unix_ns against `now_unix_ns`) as kStale. Other names are skipped without a system
/// call and count against no cap.
RankScan scan_rank_directory(const std::filesystem::path& directory, std::uint64_t now_unix_ns,
                             std::chrono::nanoseconds stale_after);

}  // namespace fragscope::agent
