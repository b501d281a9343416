#include "agent/folder_entries.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

namespace fragscope::agent {
namespace {

// A rank file's name takes a 48-byte record; a batch of at least 1 KiB holds any one name (up to 280 bytes).
constexpr std::size_t kBytesPerEntry = 64;
constexpr std::size_t kSmallestBatch = 1024;

}  // namespace

std::optional<FolderEntry> FolderEntries::next(std::size_t wanted) {
  if (at_ == filled_) {
    if (error_ != 0) return std::nullopt;
    if (!positioned_ && ::lseek(fd_, position_, SEEK_SET) < 0) {
      error_ = errno;
      return std::nullopt;
    }
    positioned_ = true;
    const std::size_t bytes =
        std::clamp(std::min(wanted, batch_.size() / kBytesPerEntry) * kBytesPerEntry, kSmallestBatch, batch_.size());
    const ssize_t got = ::getdents64(fd_, batch_.data(), bytes);
    if (got <= 0) {
      if (got < 0) error_ = errno;
      return std::nullopt;
    }
    filled_ = static_cast<std::size_t>(got);
    at_ = 0;
  }
  dirent64 record;  // copied out of the batch's bytes: the name stays in place
  std::memcpy(&record, batch_.data() + at_, offsetof(dirent64, d_name));
  FolderEntry entry{batch_.data() + at_ + offsetof(dirent64, d_name), record.d_type, position_};
  position_ = record.d_off;
  at_ += record.d_reclen;
  return entry;
}

}  // namespace fragscope::agent
