#include "agent/rank_file_reader.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "agent/fair_shares.h"
#include "agent/folder_entries.h"
#include "agent/rank_file_layout.h"
#include "agent/rank_folder.h"
#include "agent/rank_selection.h"
#include "util/shown_text.h"

namespace fragscope::agent {
namespace {

static_assert(std::endian::native == std::endian::little, "the rank file is little-endian");
static_assert(kMaxReadingsPerScan == 2 * kMaxRanksPerNode, "the header says why twice");

template <typename T>
T load(std::span<const std::byte> bytes, std::size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

std::string load_string(std::span<const std::byte> bytes, std::size_t offset) {
  const char* begin = reinterpret_cast<const char*>(bytes.data() + offset);
  return std::string(begin, strnlen(begin, layout::kStringBytes));
}

RankFileReading failure(RankFileState state, std::string problem) {
  RankFileReading reading;
  reading.state = state;
  reading.problem = std::move(problem);
  return reading;
}

RankRecord decode_payload(std::span<const std::byte> b) {
  namespace l = layout;
  RankRecord r;
  r.pid = load<std::int64_t>(b, l::kPid);
  r.rank = load<std::int32_t>(b, l::kRank);
  r.local_rank = load<std::int32_t>(b, l::kLocalRank);
  r.world_size = load<std::int32_t>(b, l::kWorldSize);
  r.gpu = load<std::int32_t>(b, l::kGpu);
  const auto phase = load<std::uint32_t>(b, l::kPhase);
  r.phase = phase < std::size(l::kPhaseByCode) ? l::kPhaseByCode[phase] : JobPhase::kUnknown;
  const auto flags = load<std::uint32_t>(b, l::kFlags);
  r.largest_free_known = (flags & l::kFlagLargestFreeKnown) != 0;
  r.throughput_totals_known = (flags & l::kFlagThroughputTotalsKnown) != 0;
  r.update_unix_ns = load<std::uint64_t>(b, l::kUpdateUnixNs);
  r.step_unix_ns = load<std::uint64_t>(b, l::kStepUnixNs);
  r.step = load<std::uint64_t>(b, l::kStep);
  r.allocated_bytes = load<std::uint64_t>(b, l::kAllocatedBytes);
  r.reserved_bytes = load<std::uint64_t>(b, l::kReservedBytes);
  r.active_bytes = load<std::uint64_t>(b, l::kActiveBytes);
  r.inactive_split_bytes = load<std::uint64_t>(b, l::kInactiveSplitBytes);
  r.requested_bytes = load<std::uint64_t>(b, l::kRequestedBytes);
  r.largest_free_block_bytes = load<std::uint64_t>(b, l::kLargestFreeBlockBytes);
  r.allocated_peak_bytes = load<std::uint64_t>(b, l::kAllocatedPeakBytes);
  r.reserved_peak_bytes = load<std::uint64_t>(b, l::kReservedPeakBytes);
  r.device_total_bytes = load<std::uint64_t>(b, l::kDeviceTotalBytes);
  r.alloc_retries = load<std::uint64_t>(b, l::kAllocRetries);
  r.ooms = load<std::uint64_t>(b, l::kOoms);
  r.segments = load<std::uint64_t>(b, l::kSegments);
  r.checkpoint_ack = load<std::uint64_t>(b, l::kCheckpointAck);
  r.batch_samples = load<std::uint64_t>(b, l::kBatchSamples);
  r.batch_tokens = load<std::uint64_t>(b, l::kBatchTokens);
  r.batch_longest_sequence = load<std::uint64_t>(b, l::kBatchLongestSequence);
  r.loader_queue_depth = load<std::int64_t>(b, l::kLoaderQueueDepth);
  r.step_seconds = load<double>(b, l::kStepSeconds);
  r.data_wait_seconds = load<double>(b, l::kDataWaitSeconds);
  r.h2d_seconds = load<double>(b, l::kH2dSeconds);
  r.compute_seconds = load<double>(b, l::kComputeSeconds);
  r.data_wait_ratio = load<double>(b, l::kDataWaitRatio);
  r.samples_per_second = load<double>(b, l::kSamplesPerSecond);
  r.step_seconds_total = load<double>(b, l::kStepSecondsTotal);
  r.data_wait_seconds_total = load<double>(b, l::kDataWaitSecondsTotal);
  r.hook_seconds_total = load<double>(b, l::kHookSecondsTotal);
  if (r.throughput_totals_known) {
    r.samples_total = load<std::uint64_t>(b, l::kSamplesTotal);
    r.tokens_total = load<std::uint64_t>(b, l::kTokensTotal);
  }
  r.job = printable_text(load_string(b, l::kJob));
  r.gpu_uuid = printable_text(load_string(b, l::kGpuUuid));
  return r;
}

std::uint32_t payload_crc(std::span<const std::byte> bytes) {
  const auto payload = bytes.subspan(layout::kHeaderSize, layout::kSize - layout::kHeaderSize);
  return static_cast<std::uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(payload.data()), static_cast<uInt>(payload.size())));
}

/// Magic, version and size: the checks that no retry can change.
std::optional<RankFileReading> check_header(std::span<const std::byte> bytes) {
  if (bytes.size() < layout::kHeaderSize) {
    return failure(RankFileState::kInvalid,
                   fmt::format("truncated: {} bytes, the header alone is {}", bytes.size(), layout::kHeaderSize));
  }
  if (std::memcmp(bytes.data(), layout::kMagic.data(), layout::kMagic.size()) != 0) {
    return failure(RankFileState::kInvalid, "not a rank file (bad magic)");
  }
  const auto version = load<std::uint32_t>(bytes, layout::kVersionOffset);
  if (version > layout::kVersion) {
    return failure(RankFileState::kUnsupported,
                   fmt::format("layout version {} is newer than this agent reads ({})", version, layout::kVersion));
  }
  if (version != layout::kVersion) {
    return failure(RankFileState::kInvalid, fmt::format("layout version {} does not exist", version));
  }
  const auto size = load<std::uint32_t>(bytes, layout::kSizeOffset);
  if (size != layout::kSize) {
    return failure(RankFileState::kInvalid,
                   fmt::format("record size {} but version 1 records are {} bytes", size, layout::kSize));
  }
  if (bytes.size() < size) {
    return failure(RankFileState::kInvalid, fmt::format("truncated: {} bytes of a {}-byte record", bytes.size(), size));
  }
  return std::nullopt;
}

/// A rank file a folder's listing found, not read yet.
struct Candidate {
  std::int64_t mtime_ns = 0;
  uid_t owner = 0;
  std::string leaf;
};

bool newer(const Candidate& a, const Candidate& b) {
  return a.mtime_ns != b.mtime_ns ? a.mtime_ns > b.mtime_ns : a.leaf < b.leaf;
}

/// The newest `cap` candidate rank files of each owner, by modification time; memory stays
/// within twice the cap per owner however many files a folder holds.
class NewestPerOwner {
 public:
  explicit NewestPerOwner(std::size_t cap) : cap_(cap) {}

  void add(uid_t owner, std::int64_t mtime_ns, std::string name) {
    auto& files = by_owner_[owner];
    files.push_back(Candidate{mtime_ns, owner, std::move(name)});
    if (files.size() >= 2 * cap_) trim(owner, files);
  }

  /// The kept candidates, newest first; dropped() and owners_over_cap() then tell about the others.
  std::vector<Candidate> take() {
    std::vector<Candidate> kept;
    for (auto& [owner, files] : by_owner_) {
      trim(owner, files);
      std::move(files.begin(), files.end(), std::back_inserter(kept));
    }
    by_owner_.clear();
    std::sort(kept.begin(), kept.end(), newer);
    return kept;
  }
  std::size_t dropped() const { return dropped_; }
  const std::set<uid_t>& owners_over_cap() const { return owners_over_cap_; }

 private:
  void trim(uid_t owner, std::vector<Candidate>& files) {
    if (files.size() <= cap_) return;
    std::nth_element(files.begin(), files.begin() + static_cast<std::ptrdiff_t>(cap_), files.end(), newer);
    dropped_ += files.size() - cap_;
    owners_over_cap_.insert(owner);
    files.erase(files.begin() + static_cast<std::ptrdiff_t>(cap_), files.end());
  }

  std::size_t cap_;
  std::size_t dropped_ = 0;
  std::set<uid_t> owners_over_cap_;
  std::map<uid_t, std::vector<Candidate>> by_owner_;
};

// A rank file's name with the checkpoint request's suffix (or its temp file's): any other name is
// not the agent's to remove, whatever it ends with (a name is any bytes).
bool is_checkpoint_file_name(std::string_view name) {
  for (const std::string_view temp : {"", ".tmp"}) {
    if (!name.ends_with(temp)) continue;
    const std::string_view flag = name.substr(0, name.size() - temp.size());
    if (flag.ends_with(layout::kCheckpointSuffix) &&
        is_rank_file_name(flag.substr(0, flag.size() - layout::kCheckpointSuffix.size())))
      return true;
  }
  return false;
}

std::string folder_label(const std::filesystem::path& directory, const RankFolder& folder) {
  return folder.prefix.empty() ? directory.string() : (directory / folder.prefix).string();
}

// A per-user folder must be a folder; where the listing says what an entry is, a name that is
// not one costs no stat (DT_UNKNOWN: the file system does not say, so it is asked).
bool may_be_folder(unsigned char type) { return type == DT_DIR || type == DT_UNKNOWN; }

/// What a listing may spend on one folder.
struct ListingCaps {
  std::size_t entries;
  std::size_t stats;
};

/// One folder's listing: its candidate rank files (each owner's newest, newest first), what it cost,
/// and whether a cap stopped it before the end.
struct FolderListing {
  std::vector<Candidate> newest_first;
  std::size_t entries = 0;  ///< examined
  std::size_t stats = 0;    ///< lstat calls
  bool past_entries = false;
  bool past_stats = false;
};

/// Lists one folder within `caps`, from the listing position `resume_at` (0: the start), which it
/// leaves where a cap stopped it (0 when the listing was read to its end); at the root, collects the
/// names of per-user folders into `user_folders`. Reads no file: the scan's readings are shared out
/// once every folder is listed.
FolderListing list_folder(const std::filesystem::path& directory, const RankFolder& folder, ListingCaps caps,
                          off_t& resume_at, RankScan& scan, std::vector<std::string>* user_folders) {
  FolderListing listing;
  const bool from_start = resume_at == 0;
  FolderEntries entries(folder.fd.get(), resume_at);
  NewestPerOwner candidates(kMaxRankFiles);
  std::size_t checkpoint_files = 0;
  std::size_t refused_folders = 0;
  std::string first_refused;
  const auto refuse_folder = [&](std::string_view name) {
    if (refused_folders++ == 0 || name < first_refused) first_refused = name;
  };
  for (;;) {
    // Enough for what the caps may still examine, and the entry that would pass them.
    const auto entry = entries.next(std::min(caps.entries - listing.entries, caps.stats - listing.stats) + 1);
    if (!entry) {
      resume_at = 0;
      if (entries.error() != 0) {
        scan.warnings.push_back(
            fmt::format("{}: cannot list: {}", folder_label(directory, folder), std::strerror(entries.error())));
      }
      break;
    }
    if (listing.entries == caps.entries) {
      listing.past_entries = true;
      resume_at = entry->position;
      break;
    }
    ++listing.entries;
    const std::string_view name = entry->name;
    const bool rank_file = is_rank_file_name(name);
    const auto uid = !rank_file && user_folders != nullptr ? user_folder_uid(name) : std::nullopt;
    if (!rank_file && !uid) {
      if (is_checkpoint_file_name(name) && ++checkpoint_files <= kMaxRankFiles) {
        scan.checkpoint_files.push_back(folder.prefix + std::string(name));
      }
      continue;
    }
    if (uid && !may_be_folder(entry->type)) {
      refuse_folder(name);
      continue;
    }
    if (listing.stats == caps.stats) {
      listing.past_stats = true;
      --listing.entries;  // examined again at the next scan
      resume_at = entry->position;
      break;
    }
    ++listing.stats;
    struct stat info {};
    if (::fstatat(folder.fd.get(), name.data(), &info, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone since
    if (rank_file) {
      candidates.add(info.st_uid, std::int64_t{info.st_mtim.tv_sec} * 1'000'000'000 + info.st_mtim.tv_nsec,
                     std::string(name));
    } else if (S_ISDIR(info.st_mode) && info.st_uid == *uid) {
      // Only a real folder of the uid it names counts: anyone may create "1000" in the root.
      user_folders->emplace_back(name);
    } else {
      refuse_folder(name);
    }
  }
  scan.listing_entries += listing.entries;
  scan.listing_stats += listing.stats;
  // Counted over a whole listing only: a flood listed part by part would word it anew at every poll.
  if (refused_folders > 0 && from_start && resume_at == 0) {
    scan.warnings.push_back(
        fmt::format("{}: {} per-user folder names skipped, not a folder of that uid (first by name: {})",
                    directory.string(), refused_folders, first_refused));
  }
  listing.newest_first = candidates.take();
  scan.files_unread += candidates.dropped();
  for (const uid_t owner : candidates.owners_over_cap()) {
    scan.warnings.push_back(fmt::format("{}: uid {} has more than {} rank files here, only the newest read",
                                        folder_label(directory, folder), owner, kMaxRankFiles));
  }
  return listing;
}

void mark_stale_or_future(RankFileReading& reading, std::uint64_t now_unix_ns, std::chrono::nanoseconds stale_after) {
  if (reading.state != RankFileState::kOk) return;
  const auto stale_ns = static_cast<std::uint64_t>(stale_after.count());
  const auto ahead_ns = static_cast<std::uint64_t>(std::chrono::nanoseconds(kMaxUpdateAhead).count());
  const std::uint64_t updated = reading.record.update_unix_ns;
  if (updated > now_unix_ns + ahead_ns) {
    reading.state = RankFileState::kInvalid;
    reading.problem =
        fmt::format("update time {:.0f} s ahead of the clock", static_cast<double>(updated - now_unix_ns) / 1e9);
  } else if (updated + stale_ns < now_unix_ns) {
    reading.state = RankFileState::kStale;
    reading.problem = fmt::format("no update for {:.0f} s", static_cast<double>(now_unix_ns - updated) / 1e9);
  }
}

/// What reading a scan's candidates needs besides them: the clock, and the torn retries left to the
/// scan, shared by its folders (1,024 folders of torn files each read again would stretch a poll
/// past /healthz's limit).
struct ReadContext {
  const std::filesystem::path& directory;
  std::uint64_t now_unix_ns;
  std::chrono::nanoseconds stale_after;
  std::size_t torn_retries;
};

/// Reads the candidate `leaf` of `folder` into `scan`; returns its reading there.
const RankFileReading& read_candidate(const RankFolder& folder, const std::string& leaf, ReadContext& context,
                                      RankScan& scan) {
  const int attempts = context.torn_retries > 0 ? 4 : 1;
  RankFileReading reading = read_rank_file_at(folder.fd.get(), leaf, folder.owner, attempts);
  if (reading.state == RankFileState::kTorn && context.torn_retries > 0) --context.torn_retries;
  reading.name = folder.prefix + leaf;
  reading.path = context.directory / reading.name;
  reading.in_user_folder = folder.owner.has_value();
  mark_stale_or_future(reading, context.now_unix_ns, context.stale_after);
  scan.readings.push_back(std::move(reading));
  return scan.readings.back();
}

/// A per-user folder's candidates, listed; the folder is opened again to read them (holding up to
/// kMaxUserFolders open at once would take the HTTP server's descriptors).
struct ListedFolder {
  std::string name;
  std::vector<Candidate> newest_first;
};

/// Cuts each folder's candidates to its max-min fair share of `room`, keeping its newest; returns
/// how many it cut. A folder listed later only lowers the others' shares, so nothing cut early
/// would have been read.
std::size_t cut_to_fair_shares(std::vector<ListedFolder>& folders, std::size_t room) {
  std::map<std::size_t, std::size_t> wanted;
  for (std::size_t i = 0; i < folders.size(); ++i) wanted[i] = folders[i].newest_first.size();
  std::size_t cut = 0;
  for (const auto& [i, share] : fair_shares(wanted, room)) {
    auto& candidates = folders[i].newest_first;
    cut += candidates.size() - share;
    candidates.erase(candidates.begin() + static_cast<std::ptrdiff_t>(share), candidates.end());
  }
  return cut;
}

/// Of `kept` (ok top-level readings of an earlier scan), those of files not among this scan's
/// top-level `candidates` that are still ok at `now_unix_ns` and whose name in `root` still holds
/// the same regular file of the same owner, most recently updated first.
std::vector<RankFileReading> still_valid_unread(const RankFolder& root, std::vector<RankFileReading> kept,
                                                const std::vector<Candidate>& candidates, std::uint64_t now_unix_ns,
                                                std::chrono::nanoseconds stale_after) {
  std::set<std::string_view> listed;
  for (const auto& candidate : candidates) listed.insert(candidate.leaf);
  std::sort(kept.begin(), kept.end(), [](const RankFileReading& a, const RankFileReading& b) {
    return a.record.update_unix_ns > b.record.update_unix_ns;
  });
  std::vector<RankFileReading> still_valid;
  for (auto& reading : kept) {
    if (listed.contains(reading.name)) continue;
    mark_stale_or_future(reading, now_unix_ns, stale_after);
    struct stat info {};
    if (reading.state != RankFileState::kOk ||
        ::fstatat(root.fd.get(), reading.name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(info.st_mode) ||
        info.st_dev != reading.device || info.st_ino != reading.inode || info.st_uid != reading.owner_uid) {
      continue;
    }
    still_valid.push_back(std::move(reading));
  }
  return still_valid;
}

/// Reads the top level's `candidates` and keeps the readings in `kept` (still_valid_unread) within
/// `room`, shared max-min fairly between owners: each owner's candidates first, newest first, then
/// its kept readings, at most kMaxRankFiles of those with its ok files read. Returns how many the
/// room left out.
std::size_t read_top_level(const RankFolder& root, const std::vector<Candidate>& candidates,
                           std::vector<RankFileReading> kept, std::size_t room, ReadContext& context, RankScan& scan) {
  std::map<uid_t, std::size_t> wanted;
  for (const auto& candidate : candidates) ++wanted[candidate.owner];
  for (const auto& reading : kept) ++wanted[reading.owner_uid];
  std::map<uid_t, std::size_t> shares = fair_shares(wanted, room);
  std::size_t left_out = 0;
  const auto take_share = [&](uid_t owner) {  // false, counted left out, once the owner's share is spent
    std::size_t& share = shares[owner];
    if (share == 0) {
      ++left_out;
      return false;
    }
    --share;
    return true;
  };
  std::map<uid_t, std::size_t> ok_by_owner;
  for (const auto& candidate : candidates) {
    if (!take_share(candidate.owner)) continue;
    // Counted by the owner read, not the one listed: the file may have been replaced since.
    const auto& reading = read_candidate(root, candidate.leaf, context, scan);
    if (reading.state == RankFileState::kOk) ++ok_by_owner[reading.owner_uid];
  }
  for (auto& reading : kept) {
    std::size_t& ok = ok_by_owner[reading.owner_uid];
    if (ok >= kMaxRankFiles || !take_share(reading.owner_uid)) continue;
    ++ok;
    scan.readings.push_back(std::move(reading));
  }
  return left_out;
}

}  // namespace

const char* state_name(RankFileState state) {
  switch (state) {
    case RankFileState::kOk: return "ok";
    case RankFileState::kTorn: return "torn";
    case RankFileState::kInvalid: return "invalid";
    case RankFileState::kUnsupported: return "unsupported";
    case RankFileState::kStale: return "stale";
  }
  return "invalid";
}

RankFileReading decode_rank_file(std::span<const std::byte> bytes) {
  if (auto problem = check_header(bytes)) return std::move(*problem);
  if (load<std::uint32_t>(bytes, layout::kCrcOffset) != payload_crc(bytes)) {
    return failure(RankFileState::kInvalid, "checksum mismatch");
  }
  RankFileReading reading;
  reading.state = RankFileState::kOk;
  reading.record = decode_payload(bytes);
  return reading;
}

RankFileReading read_rank_file_at(int folder_fd, const std::string& leaf, std::optional<uid_t> required_owner,
                                  int attempts) {
  // What is opened must be what was checked: a file renamed over the name in between is
  // checked again (a writer that replaces its file by rename is legitimate, a swap is not).
  FileDescriptor fd;
  struct stat info {};
  for (int attempt = 0; !fd; ++attempt) {
    struct stat before {};
    if (::fstatat(folder_fd, leaf.c_str(), &before, AT_SYMLINK_NOFOLLOW) != 0) {
      return failure(RankFileState::kInvalid, fmt::format("cannot stat: {}", std::strerror(errno)));
    }
    if (!S_ISREG(before.st_mode)) return failure(RankFileState::kInvalid, "not a regular file");
    if (required_owner && before.st_uid != *required_owner) {
      return failure(RankFileState::kInvalid,
                     fmt::format("owned by uid {}, not by the folder's owner {}", before.st_uid, *required_owner));
    }
    fd = FileDescriptor(::openat(folder_fd, leaf.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
    if (!fd) return failure(RankFileState::kInvalid, fmt::format("cannot open: {}", std::strerror(errno)));
    if (::fstat(fd.get(), &info) != 0 || info.st_ino != before.st_ino || info.st_dev != before.st_dev) {
      if (attempt == 2) return failure(RankFileState::kInvalid, "replaced while being opened, three times");
      fd = FileDescriptor();
    }
  }
  auto with_owner = [&](RankFileReading reading) {
    reading.owner_uid = info.st_uid;
    reading.owner_gid = info.st_gid;
    reading.device = info.st_dev;
    reading.inode = info.st_ino;
    return reading;
  };
  std::array<std::byte, layout::kSize> buffer{};
  RankFileReading last = failure(RankFileState::kTorn, "never read");
  for (int attempt = 0; attempt < std::max(attempts, 1); ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::microseconds(50 * attempt));
    const ssize_t got = ::pread(fd.get(), buffer.data(), buffer.size(), 0);
    if (got < 0) {
      return with_owner(failure(RankFileState::kInvalid, fmt::format("read failed: {}", std::strerror(errno))));
    }
    const std::span<const std::byte> bytes(buffer.data(), static_cast<std::size_t>(got));
    if (auto problem = check_header(bytes)) return with_owner(std::move(*problem));
    const auto seq = load<std::uint64_t>(bytes, layout::kSeqOffset);
    if (seq % 2 == 1) {
      last = failure(RankFileState::kTorn, fmt::format("writer mid-update (seq {} is odd)", seq));
      continue;
    }
    last = decode_rank_file(bytes);
    std::uint64_t seq_after = 0;
    if (::pread(fd.get(), &seq_after, sizeof seq_after, layout::kSeqOffset) != sizeof seq_after) {
      return with_owner(failure(RankFileState::kInvalid, "truncated while reading"));
    }
    if (seq_after != seq) {
      last = failure(RankFileState::kTorn, fmt::format("seq moved from {} to {} during the read", seq, seq_after));
      continue;
    }
    // A stable, even seq: the copy is what the writer last completed, so decode's verdict holds.
    return with_owner(std::move(last));
  }
  return with_owner(std::move(last));
}

RankFileReading read_rank_file(const std::filesystem::path& path, int attempts) {
  const auto folder = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  FileDescriptor folder_fd(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  RankFileReading reading =
      folder_fd ? read_rank_file_at(folder_fd.get(), path.filename().string(), std::nullopt, attempts)
                : failure(RankFileState::kInvalid, fmt::format("cannot open its folder: {}", std::strerror(errno)));
  reading.path = path;
  reading.name = path.filename().string();
  return reading;
}

RankDirectoryScanner::RankDirectoryScanner(std::filesystem::path directory, ScanBudget budget)
    : directory_(std::move(directory)), budget_(budget) {}

RankScan RankDirectoryScanner::scan(std::uint64_t now_unix_ns, std::chrono::nanoseconds stale_after) {
  RankScan scan;
  const auto root = open_rank_root(directory_, scan.problem);
  if (!root) return scan;
  std::vector<std::string> listed;
  off_t& root_resume_at = progress_[""].resume_at;
  const bool root_from_start = root_resume_at == 0;
  const FolderListing root_listing =
      list_folder(directory_, *root, {budget_.entries, budget_.stats}, root_resume_at, scan, &listed);
  if (root_listing.past_entries) {
    scan.warnings.push_back(fmt::format("{}: more than {} entries, each poll examines the next {}", directory_.string(),
                                        budget_.entries, budget_.entries));
  }
  if (root_listing.past_stats) {
    scan.warnings.push_back(
        fmt::format("{}: more than {} rank files and folders to check, each poll checks the next {}",
                    directory_.string(), budget_.stats, budget_.stats));
  }
  const std::vector<Candidate>& top_level = root_listing.newest_first;
  const bool root_listed_whole = root_from_start && root_resume_at == 0;
  std::set<std::string> user_folders(listed.begin(), listed.end());
  user_folders.insert(user_folders_.begin(), user_folders_.end());
  if (user_folders.size() > kMaxUserFolders) {
    scan.warnings.push_back(fmt::format("{}: {} per-user folders not read (at most {})", directory_.string(),
                                        user_folders.size() - kMaxUserFolders, kMaxUserFolders));
    user_folders.erase(std::next(user_folders.begin(), kMaxUserFolders), user_folders.end());
  }
  std::erase_if(progress_, [&](const auto& entry) {
    return !entry.first.empty() && !user_folders.contains(entry.first.substr(0, entry.first.size() - 1));
  });
  // Smallest first by their last whole listing's cost, so that what small folders leave goes to large ones.
  std::vector<std::string> order(user_folders.begin(), user_folders.end());
  const auto whole_cost = [this](const std::string& name) {
    const auto found = progress_.find(name + "/");
    return found != progress_.end() ? found->second.whole_cost : ListingProgress{}.whole_cost;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](const std::string& a, const std::string& b) { return whole_cost(a) < whole_cost(b); });
  const auto skip = [&](const std::string& problem) {
    scan.warnings.push_back(fmt::format("{}/{} (skipped)", directory_.string(), problem));
  };
  user_folders_.clear();
  std::vector<ListedFolder> user_listings;
  SharesInTurn entries(budget_.entries, order.size());
  SharesInTurn stats(budget_.stats, order.size());
  bool listed_in_part = false;
  std::size_t waiting = 0;  // candidates listed in per-user folders, not cut yet
  std::size_t left_out = 0;
  for (const auto& name : order) {
    std::string problem;
    const auto folder = open_user_folder(root->fd.get(), name, problem);
    if (!folder) {
      entries.take(0);
      stats.take(0);
      skip(problem);
      continue;
    }
    user_folders_.insert(name);
    ListingProgress& progress = progress_[folder->prefix];
    const bool from_start = progress.resume_at == 0;
    auto listing =
        list_folder(directory_, *folder, {entries.offer(), stats.offer()}, progress.resume_at, scan, nullptr);
    entries.take(listing.entries);
    stats.take(listing.stats);
    listed_in_part |= listing.past_entries || listing.past_stats;
    progress.whole_cost = from_start && progress.resume_at == 0 ? std::pair{listing.stats, listing.entries}
                                                                : ListingProgress{}.whole_cost;
    if (listing.newest_first.empty()) continue;
    waiting += listing.newest_first.size();
    user_listings.push_back(ListedFolder{name, std::move(listing.newest_first)});
    // Cut only past twice the readings: cutting after every folder would share 1,024 folders out 1,024 times.
    if (waiting > 2 * budget_.readings) {
      left_out += cut_to_fair_shares(user_listings, budget_.readings);
      waiting = std::min(waiting, budget_.readings);
    }
  }
  if (listed_in_part) {
    scan.warnings.push_back(
        fmt::format("{}: more than {} entries or {} rank files to check in its per-user folders, "
                    "each poll lists a fair share of each, on from where it stopped",
                    directory_.string(), budget_.entries, budget_.stats));
  }
  left_out += cut_to_fair_shares(user_listings, budget_.readings);
  ReadContext context{directory_, now_unix_ns, stale_after, budget_.torn_retries};
  for (const auto& listing : user_listings) {
    std::string problem;
    const auto folder = open_user_folder(root->fd.get(), listing.name, problem);
    if (!folder) {
      skip(problem);  // replaced since it was listed
      continue;
    }
    for (const auto& candidate : listing.newest_first) read_candidate(*folder, candidate.leaf, context, scan);
  }
  const std::size_t room = budget_.readings - std::min(budget_.readings, scan.readings.size());
  left_out += read_top_level(
      *root, top_level,
      root_listed_whole ? std::vector<RankFileReading>{}
                        : still_valid_unread(*root, std::move(top_level_ok_), top_level, now_unix_ns, stale_after),
      room, context, scan);
  if (left_out > 0) {
    scan.files_unread += left_out;
    scan.warnings.push_back(fmt::format(
        "{}: more than {} rank files in all its folders, each poll reads a fair share of each folder's newest",
        directory_.string(), budget_.readings));
  }
  std::sort(scan.readings.begin(), scan.readings.end(),
            [](const RankFileReading& a, const RankFileReading& b) { return a.name < b.name; });
  top_level_ok_.clear();
  for (const auto& reading : scan.readings) {
    if (!reading.in_user_folder && reading.state == RankFileState::kOk) top_level_ok_.push_back(reading);
  }
  return scan;
}

RankScan scan_rank_directory(const std::filesystem::path& directory, std::uint64_t now_unix_ns,
                             std::chrono::nanoseconds stale_after, const ScanBudget& budget) {
  return RankDirectoryScanner(directory, budget).scan(now_unix_ns, stale_after);
}

}  // namespace fragscope::agent
