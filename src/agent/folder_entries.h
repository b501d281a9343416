#pragma once
/// @file folder_entries.h
/// @brief A folder's entries, fetched from the kernel a batch at a time no larger than the caller
/// will look at. readdir(3) fetches 32 KiB of entries (about 680 rank files' names) at every call
/// whatever the caller then examines, so listing 256 flooded folders a few dozen names each made
/// the kernel produce 180,000 entries a poll, a third of the agent's time.

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace fragscope::agent {

/// @brief One entry of a folder as the listing gives it.
struct FolderEntry {
  std::string_view name;  ///< NUL-terminated in place; valid until the next call to FolderEntries::next
  unsigned char type;     ///< DT_REG, DT_DIR, ...; DT_UNKNOWN where the file system does not say
  off_t position;         ///< where to list from to meet this entry again (FolderEntries' `position`)
};

/// @brief Lists the folder open as `folder_fd` from `position`: 0 for its start, else a
/// FolderEntry::position an earlier listing of that folder gave. Moves that descriptor's offset, so
/// one listing of a descriptor at a time; the descriptor stays the caller's.
class FolderEntries {
 public:
  FolderEntries(int folder_fd, off_t position) : fd_(folder_fd), position_(position) {}

  /// The next entry; where it must ask the kernel, it fetches enough for about `wanted` entries
  /// (short names; at least 1 KiB of them, at most 32 KiB). nullopt at the end of the folder, or
  /// when it cannot be listed (error() then says why).
  std::optional<FolderEntry> next(std::size_t wanted);

  /// The errno of a listing that failed, else 0.
  int error() const { return error_; }

 private:
  int fd_;
  off_t position_;  ///< of the next entry not returned yet
  bool positioned_ = false;
  int error_ = 0;
  std::size_t filled_ = 0;
  std::size_t at_ = 0;
  alignas(8) std::array<char, 32768> batch_;
};

}  // namespace fragscope::agent
