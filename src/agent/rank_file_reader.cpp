#include "agent/rank_file_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "agent/rank_file_layout.h"

namespace fragscope::agent {
namespace {

static_assert(std::endian::native == std::endian::little, "the rank file is little-endian");

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
  r.phase = static_cast<Phase>(load<std::uint32_t>(b, l::kPhase));
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
  r.job = load_string(b, l::kJob);
  r.gpu_uuid = load_string(b, l::kGpuUuid);
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

/// Closes the descriptor on every path out of read_rank_file.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

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

RankFileReading read_rank_file(const std::filesystem::path& path, int attempts) {
  auto with_path = [&](RankFileReading reading) {
    reading.path = path;
    return reading;
  };
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (fd.get() < 0) {
    return with_path(failure(RankFileState::kInvalid, fmt::format("cannot open: {}", std::strerror(errno))));
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode)) {
    return with_path(failure(RankFileState::kInvalid, "not a regular file"));
  }
  std::array<std::byte, layout::kSize> buffer{};
  RankFileReading last = failure(RankFileState::kTorn, "never read");
  for (int attempt = 0; attempt < std::max(attempts, 1); ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::microseconds(50 * attempt));
    const ssize_t got = ::pread(fd.get(), buffer.data(), buffer.size(), 0);
    if (got < 0) {
      return with_path(failure(RankFileState::kInvalid, fmt::format("read failed: {}", std::strerror(errno))));
    }
    const std::span<const std::byte> bytes(buffer.data(), static_cast<std::size_t>(got));
    if (auto problem = check_header(bytes)) return with_path(std::move(*problem));
    const auto seq = load<std::uint64_t>(bytes, layout::kSeqOffset);
    if (seq % 2 == 1) {
      last = failure(RankFileState::kTorn, fmt::format("writer mid-update (seq {} is odd)", seq));
      continue;
    }
    last = decode_rank_file(bytes);
    std::uint64_t seq_after = 0;
    if (::pread(fd.get(), &seq_after, sizeof seq_after, layout::kSeqOffset) != sizeof seq_after) {
      return with_path(failure(RankFileState::kInvalid, "truncated while reading"));
    }
    if (seq_after != seq) {
      last = failure(RankFileState::kTorn, fmt::format("seq moved from {} to {} during the read", seq, seq_after));
      continue;
    }
    // A stable, even seq: the copy is what the writer last completed, so decode's verdict holds.
    return with_path(std::move(last));
  }
  return with_path(std::move(last));
}

std::vector<RankFileReading> scan_rank_directory(const std::filesystem::path& directory,
                                                 std::uint64_t now_unix_ns,
                                                 std::chrono::nanoseconds stale_after) {
  std::vector<std::filesystem::path> paths;
  std::error_code error;
  for (std::filesystem::directory_iterator it(directory, error), end; !error && it != end;
       it.increment(error)) {
    if (it->path().extension() != layout::kFileSuffix) continue;
    paths.push_back(it->path());
    if (paths.size() == kMaxRankFiles) break;
  }
  std::sort(paths.begin(), paths.end());
  std::vector<RankFileReading> readings;
  readings.reserve(paths.size());
  const auto stale_ns = static_cast<std::uint64_t>(stale_after.count());
  for (const auto& path : paths) {
    RankFileReading reading = read_rank_file(path);
    if (reading.state == RankFileState::kOk && reading.record.update_unix_ns + stale_ns < now_unix_ns) {
      reading.state = RankFileState::kStale;
      reading.problem = fmt::format("no update for {:.0f} s",
                                    static_cast<double>(now_unix_ns - reading.record.update_unix_ns) / 1e9);
    }
    readings.push_back(std::move(reading));
  }
  return readings;
}

}  // namespace fragscope::agent
