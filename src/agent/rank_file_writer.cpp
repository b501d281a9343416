#include "agent/rank_file_writer.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <iterator>

#include <fmt/format.h>

#include "util/error.h"

namespace fragscope::agent {
namespace {

static_assert(std::endian::native == std::endian::little, "the rank file is little-endian");

using Payload = std::array<std::byte, layout::kSize - layout::kHeaderSize>;

template <typename T>
void store(Payload& payload, std::size_t offset, T value) {
  std::memcpy(payload.data() + offset - layout::kHeaderSize, &value, sizeof(T));
}

// UTF-8, NUL-padded, cut to 64 bytes without splitting a character (as shm.py's _fixed does).
void store_string(Payload& payload, std::size_t offset, const std::string& text) {
  std::size_t length = std::min(text.size(), layout::kStringBytes);
  while (length > 0 && length < text.size() && (static_cast<unsigned char>(text[length]) & 0xC0) == 0x80) --length;
  std::memcpy(payload.data() + offset - layout::kHeaderSize, text.data(), length);
}

}  // namespace

Payload encode_rank_payload(const RankRecord& r) {
  namespace l = layout;
  Payload p{};
  store<std::int64_t>(p, l::kPid, r.pid);
  store<std::int32_t>(p, l::kRank, r.rank);
  store<std::int32_t>(p, l::kLocalRank, r.local_rank);
  store<std::int32_t>(p, l::kWorldSize, r.world_size);
  store<std::int32_t>(p, l::kGpu, r.gpu);
  std::uint32_t phase = l::kUnknownPhaseCode;
  for (std::uint32_t code = 0; code < std::size(l::kPhaseByCode); ++code)
    if (l::kPhaseByCode[code] == r.phase) phase = code;
  store<std::uint32_t>(p, l::kPhase, phase);
  store<std::uint32_t>(p, l::kFlags, (r.largest_free_known ? l::kFlagLargestFreeKnown : 0) |
                                         (r.throughput_totals_known ? l::kFlagThroughputTotalsKnown : 0));
  store<std::uint64_t>(p, l::kUpdateUnixNs, r.update_unix_ns);
  store<std::uint64_t>(p, l::kStepUnixNs, r.step_unix_ns);
  store<std::uint64_t>(p, l::kStep, r.step);
  store<std::uint64_t>(p, l::kAllocatedBytes, r.allocated_bytes);
  store<std::uint64_t>(p, l::kReservedBytes, r.reserved_bytes);
  store<std::uint64_t>(p, l::kActiveBytes, r.active_bytes);
  store<std::uint64_t>(p, l::kInactiveSplitBytes, r.inactive_split_bytes);
  store<std::uint64_t>(p, l::kRequestedBytes, r.requested_bytes);
  store<std::uint64_t>(p, l::kLargestFreeBlockBytes, r.largest_free_block_bytes);
  store<std::uint64_t>(p, l::kAllocatedPeakBytes, r.allocated_peak_bytes);
  store<std::uint64_t>(p, l::kReservedPeakBytes, r.reserved_peak_bytes);
  store<std::uint64_t>(p, l::kDeviceTotalBytes, r.device_total_bytes);
  store<std::uint64_t>(p, l::kAllocRetries, r.alloc_retries);
  store<std::uint64_t>(p, l::kOoms, r.ooms);
  store<std::uint64_t>(p, l::kSegments, r.segments);
  store<std::uint64_t>(p, l::kCheckpointAck, r.checkpoint_ack);
  store<std::uint64_t>(p, l::kBatchSamples, r.batch_samples);
  store<std::uint64_t>(p, l::kBatchTokens, r.batch_tokens);
  store<std::uint64_t>(p, l::kBatchLongestSequence, r.batch_longest_sequence);
  store<std::int64_t>(p, l::kLoaderQueueDepth, r.loader_queue_depth);
  store<double>(p, l::kStepSeconds, r.step_seconds);
  store<double>(p, l::kDataWaitSeconds, r.data_wait_seconds);
  store<double>(p, l::kH2dSeconds, r.h2d_seconds);
  store<double>(p, l::kComputeSeconds, r.compute_seconds);
  store<double>(p, l::kDataWaitRatio, r.data_wait_ratio);
  store<double>(p, l::kSamplesPerSecond, r.samples_per_second);
  store<double>(p, l::kStepSecondsTotal, r.step_seconds_total);
  store<double>(p, l::kDataWaitSecondsTotal, r.data_wait_seconds_total);
  store<double>(p, l::kHookSecondsTotal, r.hook_seconds_total);
  store_string(p, l::kJob, r.job);
  store_string(p, l::kGpuUuid, r.gpu_uuid);
  if (r.throughput_totals_known) {
    store<std::uint64_t>(p, l::kSamplesTotal, r.samples_total);
    store<std::uint64_t>(p, l::kTokensTotal, r.tokens_total);
  }
  return p;
}

RankFileWriter::RankFileWriter(std::filesystem::path path, const RankRecord& first) : path_(std::move(path)) {
  const std::filesystem::path tmp = path_.string() + ".tmp";
  fd_ = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0) throw InputError(fmt::format("{}: cannot create the rank file: {}", tmp.string(), std::strerror(errno)));
  try {
    std::array<std::byte, layout::kHeaderSize> header{};
    std::memcpy(header.data() + layout::kMagicOffset, layout::kMagic.data(), layout::kMagic.size());
    const std::uint32_t version = layout::kVersion;
    const auto size = static_cast<std::uint32_t>(layout::kSize);
    std::memcpy(header.data() + layout::kVersionOffset, &version, sizeof version);
    std::memcpy(header.data() + layout::kSizeOffset, &size, sizeof size);
    write_at(0, header.data(), header.size());
    publish(first);
    if (::rename(tmp.c_str(), path_.c_str()) != 0) {
      throw InputError(fmt::format("{}: cannot publish the rank file: {}", path_.string(), std::strerror(errno)));
    }
  } catch (...) {
    ::close(fd_);
    ::unlink(tmp.c_str());
    throw;
  }
}

RankFileWriter::~RankFileWriter() {
  ::close(fd_);
  ::unlink(path_.c_str());
}

void RankFileWriter::write_at(std::size_t offset, const void* data, std::size_t size) {
  if (::pwrite(fd_, data, size, static_cast<off_t>(offset)) != static_cast<ssize_t>(size)) {
    throw InputError(fmt::format("{}: cannot write the rank file: {}", path_.string(), std::strerror(errno)));
  }
}

void RankFileWriter::publish(const RankRecord& record) {
  const auto payload = encode_rank_payload(record);
  const auto crc = static_cast<std::uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(payload.data()), static_cast<uInt>(payload.size())));
  ++seq_;
  write_at(layout::kSeqOffset, &seq_, sizeof seq_);
  write_at(layout::kHeaderSize, payload.data(), payload.size());
  write_at(layout::kCrcOffset, &crc, sizeof crc);
  ++seq_;
  write_at(layout::kSeqOffset, &seq_, sizeof seq_);
}

}  // namespace fragscope::agent
