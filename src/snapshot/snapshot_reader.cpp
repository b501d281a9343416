#include "snapshot/snapshot_reader.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "snapshot/byte_source.h"
#include "snapshot/parallel_reader.h"
#include "snapshot/stream_reader.h"
#include "util/input_file.h"

namespace fragscope::snapshot {

Snapshot read_snapshot_file(const std::string& path, const ProgressCallback& progress, const ReadLimits& limits) {
  InputFile file = open_input(path);  // refuses directories and special files; a pipe reads once
  if (file.regular()) {
    // A large uncompressed file is read in parts: it can be read from anywhere.
    std::uint8_t head[4] = {};
    const ssize_t n = ::pread(file.fd(), head, sizeof head, 0);
    const unsigned parts = reader_parts(file.size());
    if (n > 0 && parts > 1 && detect_compression(std::span(head, static_cast<std::size_t>(n))) == Compression::kNone) {
      const int fd = file.fd();
      const ReadAt read_at = [fd](std::uint64_t offset, std::span<std::uint8_t> out) -> std::size_t {
        const ssize_t got = ::pread(fd, out.data(), out.size(), static_cast<off_t>(offset));
        return got > 0 ? static_cast<std::size_t>(got) : 0;
      };
      return read_snapshot_in_parts([&](std::uint64_t offset) { return open_plain_file_at(path, offset); }, read_at,
                                    path, file.size(), progress, parts, nullptr, limits);
    }
  }
  std::uint64_t size = 0;
  auto source = open_input_source(std::move(file), &size, limits);
  return read_snapshot(*source, path, size, progress, limits);
}

Snapshot parse_snapshot(std::span<const std::uint8_t> bytes, const std::string& source,
                        const ProgressCallback& progress, const ReadLimits& limits) {
  if (const unsigned parts = reader_parts(bytes.size());
      parts > 1 && detect_compression(bytes.first(std::min<std::size_t>(bytes.size(), 4))) == Compression::kNone) {
    const ReadAt read_at = [bytes](std::uint64_t offset, std::span<std::uint8_t> out) -> std::size_t {
      if (offset >= bytes.size()) return 0;
      const std::size_t n = std::min<std::uint64_t>(out.size(), bytes.size() - offset);
      std::memcpy(out.data(), bytes.data() + offset, n);
      return n;
    };
    return read_snapshot_in_parts([&](std::uint64_t offset) { return open_plain_memory_at(bytes, offset); }, read_at,
                                  source, bytes.size(), progress, parts, nullptr, limits);
  }
  auto stream = open_memory_source(bytes, source, limits);
  return read_snapshot(*stream, source, bytes.size(), progress, limits);
}

}  // namespace fragscope::snapshot
