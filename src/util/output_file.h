#pragma once
/// @file output_file.h
/// @brief Writes a report or criteria file whole or not at all, and never onto an input.
///
/// Why: `doctor --html run/snapshot.pickle.zst run/` once replaced the only snapshot with HTML,
/// and a write cut short (disk full) left half a report where the old one was. So the content is
/// written to a temporary file in the target's folder, flushed, and renamed over the target: a
/// failed write leaves the old file as it was. A target that is one of the inputs (same device
/// and inode, whatever the path says) is refused. A target that exists and is not a regular
/// file (/dev/stdout, a FIFO) is written in place: renaming over it would replace the device.
/// Thread-safety: free functions; concurrent writers of one path each rename whole files.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace fragscope {

/// @brief Which file a path names: its device and inode.
struct FileIdentity {
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  bool operator==(const FileIdentity&) const = default;
};

/// @brief The identity of the file `path` names (symlinks followed); nullopt when it does not exist.
std::optional<FileIdentity> identity_of(const std::string& path);

/// @brief Writes `content` to `path` as described above. `what` names it in errors ("the HTML report").
/// @throws InputError "PATH: refusing to write WHAT onto an input" when `path` names one of
/// `inputs`; "PATH: cannot write WHAT (REASON)" when the folder, the temporary file, a write,
/// the flush or the rename fails.
void write_output_file(const std::string& path, std::string_view content, std::span<const FileIdentity> inputs,
                       std::string_view what);

}  // namespace fragscope
