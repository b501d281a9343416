#pragma once
/// @file rank_folder.h
/// @brief The rank directory's layout and how the agent opens what is in it.
///
/// The root (`--rank-dir`, /dev/shm/fragscope) is shared: mode 01777, any user may create a rank
/// file at its top level. The hook keeps its files in a private per-user folder `<root>/<uid>/`
/// (mode 0700, files 0600), named after its owner's numeric uid. The agent reads both, and
/// trusts a per-user folder only when the uid in its name owns it and a file in it only when
/// that same uid owns the file. Nothing in the root is ever opened through a symbolic link,
/// and only regular files are opened at all (no FIFO can block the agent, no device is touched).

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace fragscope::agent {

/// @brief An owned file descriptor (-1 when empty), closed on destruction.
class FileDescriptor {
 public:
  FileDescriptor() = default;
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor();
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

/// @brief True for the names the hook gives rank files: `rank<R>-pid<P>.fsr` (R may be negative).
bool is_rank_file_name(std::string_view name);

/// @brief The uid a per-user folder's name states (decimal, no sign, no leading zero), or nullopt.
std::optional<uid_t> user_folder_uid(std::string_view name);

/// @brief A folder of the rank directory, opened: the root itself, or one user's folder.
struct RankFolder {
  FileDescriptor fd;
  std::string prefix;            ///< "" for the root, "<uid>/" for a per-user folder
  std::optional<uid_t> owner;    ///< the uid every file in it must belong to (per-user folders)
};

/// @brief Opens the rank directory itself. @return nullopt with `problem` set ("rank directory
/// PATH: REASON") when it is missing or not a readable directory.
std::optional<RankFolder> open_rank_root(const std::filesystem::path& rank_dir, std::string& problem);

/// @brief Opens the per-user folder `name` of the root `root_fd`, without following a link, and
/// only when the uid in its name owns it. @return nullopt with `problem` set otherwise.
std::optional<RankFolder> open_user_folder(int root_fd, std::string_view name, std::string& problem);

/// @brief Opens the folder that holds `relative` ("rank0-pid1.fsr" or "1000/rank0-pid1.fsr",
/// as RankFileReading::name spells it) and splits off the file's own name into `leaf`.
/// @return nullopt with `problem` set when the folder cannot be opened safely.
std::optional<RankFolder> open_folder_of(const std::filesystem::path& rank_dir, std::string_view relative,
                                         std::string& leaf, std::string& problem);

}  // namespace fragscope::agent
