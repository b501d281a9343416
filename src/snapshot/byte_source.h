#pragma once
/// @file byte_source.h
/// @brief Sequential byte sources for readers: a file, a memory span, and the gzip / zstd
/// decompressors over either, chosen by magic bytes (never by file name).
///
/// Readers pull bytes in chunks, so a 1 GB snapshot is never held whole in memory. A reader
/// that can work on borrowed bytes calls next_chunk(): the chunks a file source reads (and
/// decompresses) ahead on its second thread are then handed over, not copied.
/// The decompressors refuse a stream that outgrows its input kMaxDecompressionRatio times
/// (read_limits.h), unless the limits' relative part is off. Thread-safety: one source per reader thread.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "snapshot/read_limits.h"
#include "util/input_file.h"

namespace fragscope::snapshot {

enum class Compression : std::uint8_t { kNone, kGzip, kZstd };

/// @brief A stream of bytes read front to back.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  /// @brief Copies up to `out.size()` bytes into `out`; returns how many (0 = end of input).
  /// @throws InputError naming the source on read or decompression errors.
  virtual std::size_t read(std::span<std::uint8_t> out) = 0;
  /// @brief read() until `out` is full or the input ends; returns how many bytes were read.
  /// @throws InputError as read().
  std::size_t read_fully(std::span<std::uint8_t> out);
  /// @brief The next bytes of the stream, borrowed: valid until the next call to next_chunk()
  /// or read(). Empty at the end of the input. The default reads into a buffer of the source.
  /// @throws InputError as read().
  virtual std::span<const std::uint8_t> next_chunk();
  /// @brief Bytes of the underlying (compressed) input consumed so far, for progress.
  virtual std::uint64_t input_consumed() const = 0;
  /// @brief Total bytes this source will produce when known up front (else 0); a hint only.
  virtual std::uint64_t expected_size() const { return 0; }
  /// @brief True when the last next_chunk() came back empty at a pause the owner set (the
  /// parallel reader's stop before a part parsed apart), not at the end of the input.
  virtual bool paused() const { return false; }
  /// @brief Removes the pause: the bytes after it follow. Only after paused() was true.
  virtual void lift_pause() {}

 private:
  std::vector<std::uint8_t> chunk_buffer_;  // for the default next_chunk()
};

/// @brief Recognises gzip (1f 8b) and zstd (28 b5 2f fd) magic numbers.
Compression detect_compression(std::span<const std::uint8_t> head);

/// @brief The file at `path` (a regular file or a pipe: util/input_file.h), decompressed when its
/// magic says so. `input_size` receives the file's size on disk (for progress; 0 for a pipe).
/// @throws InputError naming `path` when it is missing, unreadable or a special file.
std::unique_ptr<ByteSource> open_file_source(const std::string& path, std::uint64_t* input_size,
                                             const ReadLimits& limits = {});

/// @brief open_file_source() of an input already open; it takes the descriptor over.
/// @throws InputError naming the file when it cannot be read.
std::unique_ptr<ByteSource> open_input_source(InputFile file, std::uint64_t* input_size, const ReadLimits& limits = {});

/// @brief `bytes` (not copied; must outlive the source), decompressed when its magic says so.
std::unique_ptr<ByteSource> open_memory_source(std::span<const std::uint8_t> bytes, const std::string& name,
                                               const ReadLimits& limits = {});

/// @brief The uncompressed file at `path` from byte `offset` on (read ahead on a second thread,
/// as open_file_source). REQUIRES: file_compression(path) is kNone.
/// @throws InputError naming `path` when it cannot be opened or is shorter than `offset`.
std::unique_ptr<ByteSource> open_plain_file_at(const std::string& path, std::uint64_t offset);
/// @brief Uncompressed `bytes` (not copied) from byte `offset` on.
std::unique_ptr<ByteSource> open_plain_memory_at(std::span<const std::uint8_t> bytes, std::uint64_t offset);

}  // namespace fragscope::snapshot
