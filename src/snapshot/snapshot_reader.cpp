#include "snapshot/snapshot_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "snapshot/byte_source.h"
#include "snapshot/parallel_reader.h"
#include "snapshot/stream_reader.h"

namespace fragscope::snapshot {

Snapshot read_snapshot_file(const std::string& path, const ProgressCallback& progress) {
  // A large uncompressed file is read in parts: it can be read from anywhere.
  if (file_compression(path) == Compression::kNone) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      const struct Close {
        int fd;
        ~Close() { ::close(fd); }
      } close_fd{fd};
      struct stat info {};
      const bool regular = ::fstat(fd, &info) == 0 && S_ISREG(info.st_mode);  // else open_file_source says why not
      const std::uint64_t size = regular ? static_cast<std::uint64_t>(info.st_size) : 0;
      if (const unsigned parts = reader_parts(size); regular && parts > 1) {
        const ReadAt read_at = [fd](std::uint64_t offset, std::span<std::uint8_t> out) -> std::size_t {
          const ssize_t n = ::pread(fd, out.data(), out.size(), static_cast<off_t>(offset));
          return n > 0 ? static_cast<std::size_t>(n) : 0;
        };
        return read_snapshot_in_parts([&](std::uint64_t offset) { return open_plain_file_at(path, offset); }, read_at,
                                      path, size, progress, parts);
      }
    }
  }
  std::uint64_t size = 0;
  auto source = open_file_source(path, &size);
  return read_snapshot(*source, path, size, progress);
}

Snapshot parse_snapshot(std::span<const std::uint8_t> bytes, const std::string& source,
                        const ProgressCallback& progress) {
  if (const unsigned parts = reader_parts(bytes.size());
      parts > 1 && detect_compression(bytes.first(std::min<std::size_t>(bytes.size(), 4))) == Compression::kNone) {
    const ReadAt read_at = [bytes](std::uint64_t offset, std::span<std::uint8_t> out) -> std::size_t {
      if (offset >= bytes.size()) return 0;
      const std::size_t n = std::min<std::uint64_t>(out.size(), bytes.size() - offset);
      std::memcpy(out.data(), bytes.data() + offset, n);
      return n;
    };
    return read_snapshot_in_parts([&](std::uint64_t offset) { return open_plain_memory_at(bytes, offset); }, read_at,
                                  source, bytes.size(), progress, parts);
  }
  auto stream = open_memory_source(bytes, source);
  return read_snapshot(*stream, source, bytes.size(), progress);
}

}  // namespace fragscope::snapshot
