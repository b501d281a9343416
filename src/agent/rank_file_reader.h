#pragma once
/// @file rank_file_reader.h
/// @brief Reads rank files (docs/rank-file.md) without ever using a torn or foreign record.

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
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
  /// In its owner's per-user folder (rank_folder.h), where only that uid can have written it; a
  /// file at the shared top level may claim any job and rank.
  bool in_user_folder = false;
  dev_t device = 0;  ///< the file read, once opened: a reading kept for later scans must still be this file
  ino_t inode = 0;
  RankFileState state = RankFileState::kInvalid;
  std::string problem;
  RankRecord record;  ///< meaningful for kOk and kStale only
};

/// @brief Decodes a stable copy of a rank file: checks magic, version, size and CRC; the job and
/// GPU UUID strings come out as printable UTF-8 (util/shown_text.h).
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

/// @brief At most this many rank files of one owner are read per folder and scan (the owner's
/// newest, by modification time), so a flooded directory cannot hide another user's ranks; no
/// more are ever tracked per owner (kMaxRanksPerOwner, rank_selection.h) than this.
inline constexpr std::size_t kMaxRankFiles = 1024;

/// @brief At most this many per-user folders are read per scan.
inline constexpr std::size_t kMaxUserFolders = 1024;

/// @brief At most this many rank files are read, and readings kept, per scan in all its folders
/// together, so that a poll's memory and reading time do not grow with the number of folders (64
/// per-user folders of 1,024 rank files each took the agent past the DaemonSet's 128 MiB, and a
/// poll to 1.9 s). Twice kMaxRanksPerNode (rank_selection.h): where every file read is a live rank
/// of its own, a folder's fair share of the readings is already at least its owner's fair share of
/// the ranks tracked; the second half is room for files that are not (stale ones left behind, a
/// restarted rank's old file, torn ones) and for the top level, which gets what the per-user
/// folders leave.
inline constexpr std::size_t kMaxReadingsPerScan = 2048;

/// @brief An update time further ahead of the agent's clock than this makes a record kInvalid: a
/// record that claims the future would never go stale. The hook and the agent read the same
/// host clock, so this only covers a write that lands while the scan runs.
inline constexpr std::chrono::seconds kMaxUpdateAhead{10};

/// @brief What one scan may spend, so that a poll costs a bounded time however many files and
/// folders whoever can write the rank directory makes. Listing: the top level's budget is its own
/// (it is listed first and finds the per-user folders: sharing with up to 1,024 of them would find
/// new ones 8 names a poll), and the per-user folders share as much again, all of them together
/// (RankDirectoryScanner says how; per folder, 256 folders of 1,024 rank files took 1.2 s). A folder
/// listed past its budget is listed on from there at the next scan, its entries fetched no more than
/// the budget lets it examine (folder_entries.h). The defaults keep a poll near 50 ms of CPU for a
/// flooded top level, and a poll of 1,024 flooded per-user folders under 0.2 s (docs/SECURITY.md).
struct ScanBudget {
  std::size_t entries = 65536;  ///< directory entries examined at the top level; as many in all per-user folders
  /// lstat calls for rank-named files and would-be per-user folders at the top level; as many in all per-user folders
  std::size_t stats = 8192;
  /// torn files read again (up to ~700 µs each), in all folders together; the others are torn at once
  std::size_t torn_retries = 16;
  /// rank files read and readings kept, in all folders together (RankDirectoryScanner says how they are shared)
  std::size_t readings = kMaxReadingsPerScan;
};

/// @brief One scan of the rank directory.
struct RankScan {
  std::vector<RankFileReading> readings;  ///< sorted by name
  /// Checkpoint requests and their temp files seen (names as RankFileReading::name spells them),
  /// for ActionDispatcher::remove_requests_of_gone_ranks.
  std::vector<std::string> checkpoint_files;
  std::string problem;  ///< set when the rank directory itself cannot be read: nothing is reported
  /// One line each: folders refused, files left unread, a budget spent. Worded without counts, so
  /// a flood that goes on is reported once, not at every poll.
  std::vector<std::string> warnings;
  /// Rank-named files listed but not read: over an owner's cap in a folder, or past the scan's readings. Those
  /// a listing did not reach are not counted (a warning says so): they are listed at the next scans.
  std::size_t files_unread = 0;
  /// What listing the folders cost, in all of them: directory entries examined and lstat calls (within ScanBudget).
  std::size_t listing_entries = 0;
  std::size_t listing_stats = 0;
};

/// @brief Scans the rank directory poll after poll: every rank file (`rank<R>-pid<P>.fsr`) at the
/// top of the directory and in its per-user folders (rank_folder.h), within the scan's budget.
/// A folder listed past its budget is listed on from there at the next scan, so every entry is
/// examined within a few polls however large the folder; the per-user folders found so far are
/// opened by name at every scan, so a root flooded past its budget cannot hide them. Valid records
/// older than `stale_after` (by update_unix_ns against `now_unix_ns`) are kStale, those more than
/// kMaxUpdateAhead ahead of it kInvalid. Other names cost no system call (only a listing entry)
/// and count against no cap.
///
/// The per-user folders share their listing budget (ScanBudget::entries and ::stats) in turn
/// (SharesInTurn, fair_shares.h): each is offered an equal share of what the folders listed before
/// it left, so a folder of no more entries and rank files than an equal share of the whole budget is
/// listed whole at every scan, however many the others hold. They are listed smallest first by what
/// their last listing from start to end cost (those never listed whole last, by name), so that what
/// small folders leave goes to the large ones: the shares are then max-min fair. One warning, the
/// same at every scan, says a folder was left to be listed on.
///
/// A top level listed past its budget is read a part per poll, so a scan keeps the last ok reading
/// of each top-level rank file it did not read, while that reading is still ok by this scan's
/// clock and the name still holds the same regular file of the same owner (one `fstatat` each,
/// no read; at most kMaxRankFiles per owner with the ok files read): other users' ranks at a
/// flooded top level do not come and go between polls, and a file removed goes at the next scan.
///
/// Every folder is listed before any file is read, so that the scan's readings
/// (ScanBudget::readings) go where the layout puts honest users first, as select_ranks
/// (rank_selection.h) grants its room: the per-user folders' candidates (each folder's newest) are
/// read first, the readings shared max-min fairly between folders (fair_shares.h), then what they
/// leave goes to the top level, shared between its owners, each owner's newest files read first
/// and its kept readings after them. A per-user folder of no more files than an equal share is
/// therefore read whole, however many files the other folders hold. Files left out count in
/// files_unread and give one warning, the same at every scan while the flood goes on. While the
/// folders are listed, their candidates are cut to fair shares whenever they pass twice the
/// readings, so the names waiting to be read stay bounded too; each per-user folder is opened again
/// to be read (holding 1,024 of them open would take the HTTP server's descriptors).
/// Not thread-safe: one poll loop owns it.
class RankDirectoryScanner {
 public:
  explicit RankDirectoryScanner(std::filesystem::path directory, ScanBudget budget = {});

  RankScan scan(std::uint64_t now_unix_ns, std::chrono::nanoseconds stale_after);

 private:
  /// Where a folder's listing stands between scans.
  struct ListingProgress {
    off_t resume_at = 0;  ///< the listing position to go on from (FolderEntry::position); 0: the start
    /// lstat calls and entries its last listing from start to end took in one scan; until then, the most
    std::pair<std::size_t, std::size_t> whole_cost{SIZE_MAX, SIZE_MAX};
  };

  std::filesystem::path directory_;
  ScanBudget budget_;
  std::set<std::string> user_folders_;  ///< found and opened at the last scan
  std::vector<RankFileReading> top_level_ok_;  ///< the last scan's ok top-level readings, read or kept
  std::map<std::string, ListingProgress> progress_;  ///< by folder prefix ("" for the top level)
};

/// @brief One scan by a fresh RankDirectoryScanner: the whole directory when it is within budget.
RankScan scan_rank_directory(const std::filesystem::path& directory, std::uint64_t now_unix_ns,
                             std::chrono::nanoseconds stale_after, const ScanBudget& budget = {});

}  // namespace fragscope::agent
