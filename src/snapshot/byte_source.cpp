#include "snapshot/byte_source.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <zlib.h>
#include <zstd.h>

#include "snapshot/read_limits.h"
#include "util/bytes.h"
#include "util/error.h"

namespace fragscope::snapshot {

namespace {

constexpr std::size_t kChunk = 1 << 20;

// A decompressor's output against its input so far (read_limits.h): a bomb stops within a chunk.
void check_ratio(bool limited, std::uint64_t produced, std::uint64_t consumed, const std::string& name) {
  if (!limited || produced <= kDecompressionFloor + kMaxDecompressionRatio * consumed) return;
  throw InputError(fmt::format("{}: decompresses to more than {} times its size plus {} ({} from {}): a "
                               "decompression bomb, not a snapshot (real ones stay well within, even under zstd "
                               "--ultra -22; --max-memory SIZE reads a file you trust within SIZE)",
                               name, kMaxDecompressionRatio, format_bytes(kDecompressionFloor), format_bytes(produced),
                               format_bytes(consumed)));
}

class FileSource final : public ByteSource {
 public:
  FileSource(std::FILE* file, std::string name, std::uint64_t size)
      : file_(file), name_(std::move(name)), size_(size) {}
  ~FileSource() override { std::fclose(file_); }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  std::size_t read(std::span<std::uint8_t> out) override {
    const std::size_t n = std::fread(out.data(), 1, out.size(), file_);
    if (n < out.size() && std::ferror(file_))
      throw InputError(fmt::format("{}: read error: {}", name_, std::strerror(errno)));
    consumed_ += n;
    return n;
  }
  std::uint64_t input_consumed() const override { return consumed_; }
  std::uint64_t expected_size() const override { return size_; }

 private:
  std::FILE* file_;
  std::string name_;
  std::uint64_t size_;
  std::uint64_t consumed_ = 0;
};

class MemorySource final : public ByteSource {
 public:
  explicit MemorySource(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}
  std::size_t read(std::span<std::uint8_t> out) override {
    const std::size_t n = std::min(out.size(), bytes_.size() - pos_);
    std::memcpy(out.data(), bytes_.data() + pos_, n);
    pos_ += n;
    return n;
  }
  std::span<const std::uint8_t> next_chunk() override {
    const auto rest = bytes_.subspan(pos_);
    pos_ = bytes_.size();
    return rest;
  }
  std::uint64_t input_consumed() const override { return pos_; }
  std::uint64_t expected_size() const override { return bytes_.size(); }

 private:
  std::span<const std::uint8_t> bytes_;
  std::size_t pos_ = 0;
};

/// Replays bytes already peeked from `inner` before handing over to it.
class PeekedSource final : public ByteSource {
 public:
  PeekedSource(std::unique_ptr<ByteSource> inner, std::vector<std::uint8_t> head)
      : inner_(std::move(inner)), head_(std::move(head)) {}
  std::size_t read(std::span<std::uint8_t> out) override {
    if (head_pos_ < head_.size()) {
      const std::size_t n = std::min(out.size(), head_.size() - head_pos_);
      std::memcpy(out.data(), head_.data() + head_pos_, n);
      head_pos_ += n;
      return n;
    }
    return inner_->read(out);
  }
  std::span<const std::uint8_t> next_chunk() override {
    if (head_pos_ < head_.size()) {
      const auto rest = std::span<const std::uint8_t>(head_).subspan(head_pos_);
      head_pos_ = head_.size();
      return rest;
    }
    return inner_->next_chunk();
  }
  std::uint64_t input_consumed() const override { return inner_->input_consumed(); }
  std::uint64_t expected_size() const override { return inner_->expected_size(); }

 private:
  std::unique_ptr<ByteSource> inner_;
  std::vector<std::uint8_t> head_;
  std::size_t head_pos_ = 0;
};

class ZstdSource final : public ByteSource {
 public:
  ZstdSource(std::unique_ptr<ByteSource> inner, std::string name, std::uint64_t content_size, bool limit_ratio)
      : inner_(std::move(inner)), name_(std::move(name)), content_size_(content_size), limit_ratio_(limit_ratio),
        stream_(ZSTD_createDStream()),
        in_buffer_(ZSTD_DStreamInSize()) {
    if (!stream_) throw std::bad_alloc();
    ZSTD_initDStream(stream_);
  }
  ~ZstdSource() override { ZSTD_freeDStream(stream_); }
  ZstdSource(const ZstdSource&) = delete;
  ZstdSource& operator=(const ZstdSource&) = delete;

  std::size_t read(std::span<std::uint8_t> out) override {
    ZSTD_outBuffer output{out.data(), out.size(), 0};
    while (output.pos < output.size) {
      if (input_.pos == input_.size) {
        if (input_done_) break;
        const std::size_t n = inner_->read(in_buffer_);
        if (n == 0) {
          input_done_ = true;
          if (!frame_complete_)
            throw InputError(fmt::format("{}: truncated zstd stream (ends inside a frame)", name_));
          break;
        }
        input_ = {in_buffer_.data(), n, 0};
      }
      const std::size_t ret = ZSTD_decompressStream(stream_, &output, &input_);
      if (ZSTD_isError(ret))
        throw InputError(fmt::format("{}: corrupt zstd data: {}", name_, ZSTD_getErrorName(ret)));
      frame_complete_ = (ret == 0);
    }
    check_ratio(limit_ratio_, produced_ += output.pos, inner_->input_consumed(), name_);
    return output.pos;
  }
  std::uint64_t input_consumed() const override { return inner_->input_consumed(); }
  std::uint64_t expected_size() const override { return content_size_; }

 private:
  std::unique_ptr<ByteSource> inner_;
  std::string name_;
  std::uint64_t content_size_;
  bool limit_ratio_;
  ZSTD_DStream* stream_;
  std::vector<std::uint8_t> in_buffer_;
  ZSTD_inBuffer input_{nullptr, 0, 0};
  bool input_done_ = false;
  bool frame_complete_ = true;
  std::uint64_t produced_ = 0;
};

class GzipSource final : public ByteSource {
 public:
  GzipSource(std::unique_ptr<ByteSource> inner, std::string name, bool limit_ratio)
      : inner_(std::move(inner)), name_(std::move(name)), limit_ratio_(limit_ratio), in_buffer_(kChunk) {
    std::memset(&stream_, 0, sizeof stream_);
    if (inflateInit2(&stream_, 16 + MAX_WBITS) != Z_OK) throw std::bad_alloc();
  }
  ~GzipSource() override { inflateEnd(&stream_); }
  GzipSource(const GzipSource&) = delete;
  GzipSource& operator=(const GzipSource&) = delete;

  std::size_t read(std::span<std::uint8_t> out) override {
    stream_.next_out = out.data();
    stream_.avail_out = static_cast<uInt>(std::min<std::size_t>(out.size(), 1u << 30));
    const std::size_t wanted = stream_.avail_out;
    while (stream_.avail_out > 0 && !finished_) {
      if (stream_.avail_in == 0) {
        const std::size_t n = inner_->read(in_buffer_);
        if (n == 0) throw InputError(fmt::format("{}: truncated gzip stream", name_));
        stream_.next_in = in_buffer_.data();
        stream_.avail_in = static_cast<uInt>(n);
      }
      const int ret = inflate(&stream_, Z_NO_FLUSH);
      if (ret == Z_STREAM_END) {
        // Concatenated gzip members are legal: continue with the next one if input remains.
        if (stream_.avail_in == 0) {
          std::size_t n = inner_->read(in_buffer_);
          if (n == 0) {
            finished_ = true;
            break;
          }
          stream_.next_in = in_buffer_.data();
          stream_.avail_in = static_cast<uInt>(n);
        }
        inflateReset(&stream_);
      } else if (ret != Z_OK && ret != Z_BUF_ERROR) {
        throw InputError(fmt::format("{}: corrupt gzip data: {}", name_,
                                     stream_.msg ? stream_.msg : "inflate failed"));
      }
    }
    const std::size_t produced = wanted - stream_.avail_out;
    check_ratio(limit_ratio_, produced_ += produced, inner_->input_consumed(), name_);
    return produced;
  }
  std::uint64_t input_consumed() const override { return inner_->input_consumed(); }
  // Snapshot pickles compress about 20:1 with gzip; a hint for reservations only.
  std::uint64_t expected_size() const override { return inner_->expected_size() * 20; }

 private:
  std::unique_ptr<ByteSource> inner_;
  std::string name_;
  bool limit_ratio_;
  z_stream stream_;
  std::vector<std::uint8_t> in_buffer_;
  bool finished_ = false;
  std::uint64_t produced_ = 0;
};

/// Reads (and decompresses) ahead on a second thread, so decompression overlaps parsing.
class ThreadedSource final : public ByteSource {
 public:
  explicit ThreadedSource(std::unique_ptr<ByteSource> inner)
      : inner_(std::move(inner)), expected_(inner_->expected_size()),
        worker_([this] { produce(); }) {}
  ~ThreadedSource() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    worker_.join();
  }
  ThreadedSource(const ThreadedSource&) = delete;
  ThreadedSource& operator=(const ThreadedSource&) = delete;

  std::size_t read(std::span<std::uint8_t> out) override {
    std::size_t copied = 0;
    while (copied < out.size()) {
      if (current_pos_ == current_.size() && !take_next()) break;
      const std::size_t n = std::min(out.size() - copied, current_.size() - current_pos_);
      std::memcpy(out.data() + copied, current_.data() + current_pos_, n);
      copied += n;
      current_pos_ += n;
    }
    return copied;
  }
  std::span<const std::uint8_t> next_chunk() override {
    if (current_pos_ == current_.size() && !take_next()) return {};
    const auto rest = std::span<const std::uint8_t>(current_).subspan(current_pos_);
    current_pos_ = current_.size();
    return rest;
  }
  std::uint64_t input_consumed() const override { return consumed_; }
  std::uint64_t expected_size() const override { return expected_; }

 private:
  static constexpr std::size_t kDepth = 4;

  /// Makes the next decompressed chunk current, recycling the old one; false at the end.
  /// @throws what the producer threw.
  bool take_next() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return !ready_.empty() || done_; });
    if (ready_.empty()) {
      if (error_) std::rethrow_exception(error_);
      return false;
    }
    free_.push_back(std::move(current_));
    current_ = std::move(ready_.front());
    ready_.pop_front();
    current_pos_ = 0;
    consumed_ = ready_consumed_.front();
    ready_consumed_.pop_front();
    changed_.notify_all();
    return true;
  }

  void produce() {
    try {
      for (;;) {
        std::vector<std::uint8_t> chunk;
        {
          std::unique_lock lock(mutex_);
          changed_.wait(lock, [this] { return ready_.size() < kDepth || stop_; });
          if (stop_) return;
          if (!free_.empty()) {
            chunk = std::move(free_.back());
            free_.pop_back();
          }
        }
        chunk.resize(kChunk);
        const std::size_t filled = inner_->read_fully(chunk);
        chunk.resize(filled);
        const std::uint64_t consumed = inner_->input_consumed();
        std::lock_guard lock(mutex_);
        if (filled == 0) {
          done_ = true;
          changed_.notify_all();
          return;
        }
        ready_.push_back(std::move(chunk));
        ready_consumed_.push_back(consumed);
        changed_.notify_all();
      }
    } catch (...) {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
      done_ = true;
      changed_.notify_all();
    }
  }

  std::unique_ptr<ByteSource> inner_;
  std::uint64_t expected_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::vector<std::uint8_t>> ready_;
  std::deque<std::uint64_t> ready_consumed_;
  std::vector<std::vector<std::uint8_t>> free_;
  std::exception_ptr error_;
  bool done_ = false;
  bool stop_ = false;
  std::vector<std::uint8_t> current_;
  std::size_t current_pos_ = 0;
  std::uint64_t consumed_ = 0;
  std::thread worker_;  // last: starts after every other member is ready
};

std::unique_ptr<ByteSource> wrap_by_magic(std::unique_ptr<ByteSource> raw, const std::string& name, bool limit_ratio) {
  std::vector<std::uint8_t> head(18);  // ZSTD_FRAMEHEADERSIZE_MAX: magic + the largest frame header;
  head.resize(raw->read_fully(head));
  const Compression kind = detect_compression(head);
  const std::vector<std::uint8_t> head_copy = head;
  auto peeked = std::make_unique<PeekedSource>(std::move(raw), std::move(head));
  switch (kind) {
    case Compression::kZstd: {
      const unsigned long long size = ZSTD_getFrameContentSize(head_copy.data(), head_copy.size());
      const bool known = size != ZSTD_CONTENTSIZE_UNKNOWN && size != ZSTD_CONTENTSIZE_ERROR;
      // The header's content size is only a hint for reservations, and a hostile header can claim
      // exabytes: trust it up to the ratio a stream may have at all (read_limits.h).
      const std::uint64_t plausible = peeked->expected_size() * kMaxDecompressionRatio + kDecompressionFloor;
      return std::make_unique<ZstdSource>(std::move(peeked), name, known ? std::min<std::uint64_t>(size, plausible) : 0,
                                          limit_ratio);
    }
    case Compression::kGzip: return std::make_unique<GzipSource>(std::move(peeked), name, limit_ratio);
    case Compression::kNone: break;
  }
  return peeked;
}

}  // namespace

std::size_t ByteSource::read_fully(std::span<std::uint8_t> out) {
  std::size_t filled = 0;
  while (filled < out.size()) {
    const std::size_t n = read(out.subspan(filled));
    if (n == 0) break;
    filled += n;
  }
  return filled;
}

std::span<const std::uint8_t> ByteSource::next_chunk() {
  chunk_buffer_.resize(kChunk);
  return {chunk_buffer_.data(), read_fully(chunk_buffer_)};
}

Compression detect_compression(std::span<const std::uint8_t> head) {
  if (head.size() >= 2 && head[0] == 0x1f && head[1] == 0x8b) return Compression::kGzip;
  if (head.size() >= 4 && head[0] == 0x28 && head[1] == 0xb5 && head[2] == 0x2f && head[3] == 0xfd)
    return Compression::kZstd;
  return Compression::kNone;
}

std::unique_ptr<ByteSource> open_file_source(const std::string& path, std::uint64_t* input_size,
                                             const ReadLimits& limits) {
  return open_input_source(open_input(path), input_size, limits);
}

std::unique_ptr<ByteSource> open_input_source(InputFile file, std::uint64_t* input_size, const ReadLimits& limits) {
  const std::string path = file.path();
  const std::uint64_t size = file.size();
  std::FILE* stream = ::fdopen(file.fd(), "rb");
  if (!stream) throw InputError(fmt::format("{}: cannot read ({})", path, std::strerror(errno)));
  file.release();  // the FILE owns the descriptor now
  if (input_size) *input_size = size;
  // Read (and decompress) ahead on a second thread; its chunks are handed over, not copied.
  return std::make_unique<ThreadedSource>(
      wrap_by_magic(std::make_unique<FileSource>(stream, path, size), path, limits.relative));
}

std::unique_ptr<ByteSource> open_memory_source(std::span<const std::uint8_t> bytes, const std::string& name,
                                               const ReadLimits& limits) {
  return wrap_by_magic(std::make_unique<MemorySource>(bytes), name, limits.relative);
}

std::unique_ptr<ByteSource> open_plain_file_at(const std::string& path, std::uint64_t offset) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) throw InputError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat info {};
  const std::uint64_t size =
      fstat(fileno(file), &info) == 0 && S_ISREG(info.st_mode) ? static_cast<std::uint64_t>(info.st_size) : 0;
  if (offset > size || std::fseek(file, static_cast<long>(offset), SEEK_SET) != 0) {
    std::fclose(file);
    throw InputError(fmt::format("{}: cannot seek to byte {}", path, offset));
  }
  return std::make_unique<ThreadedSource>(std::make_unique<FileSource>(file, path, size - offset));
}

std::unique_ptr<ByteSource> open_plain_memory_at(std::span<const std::uint8_t> bytes, std::uint64_t offset) {
  return std::make_unique<MemorySource>(bytes.subspan(std::min<std::uint64_t>(offset, bytes.size())));
}

}  // namespace fragscope::snapshot
