#include "agent/rank_folder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include <fmt/format.h>

#include "agent/rank_file_layout.h"

namespace fragscope::agent {
namespace {

bool all_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) ::close(fd_);
}

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

bool is_rank_file_name(std::string_view name) {
  if (!name.starts_with("rank") || !name.ends_with(layout::kFileSuffix)) return false;
  name.remove_prefix(4);
  name.remove_suffix(layout::kFileSuffix.size());
  if (name.starts_with('-')) name.remove_prefix(1);
  const auto dash = name.find("-pid");
  return dash != std::string_view::npos && all_digits(name.substr(0, dash)) && all_digits(name.substr(dash + 4));
}

std::optional<uid_t> user_folder_uid(std::string_view name) {
  if (!all_digits(name) || (name.size() > 1 && name.front() == '0')) return std::nullopt;
  std::uint32_t uid = 0;
  const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), uid);
  if (error != std::errc() || end != name.data() + name.size() || uid == static_cast<std::uint32_t>(-1)) {
    return std::nullopt;
  }
  return static_cast<uid_t>(uid);
}

std::optional<RankFolder> open_rank_root(const std::filesystem::path& rank_dir, std::string& problem) {
  FileDescriptor fd(::open(rank_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    problem = fmt::format("rank directory {}: {}", rank_dir.string(), std::strerror(errno));
    return std::nullopt;
  }
  return RankFolder{std::move(fd), "", std::nullopt};
}

std::optional<RankFolder> open_user_folder(int root_fd, std::string_view name, std::string& problem) {
  const auto uid = user_folder_uid(name);
  if (!uid) {
    problem = fmt::format("{}: not a per-user folder name", name);
    return std::nullopt;
  }
  const std::string folder(name);
  FileDescriptor fd(::openat(root_fd, folder.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    problem = fmt::format("{}: {}", folder, errno == ELOOP ? "a symbolic link, not a folder" : std::strerror(errno));
    return std::nullopt;
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0 || info.st_uid != *uid) {
    problem = fmt::format("{}: owned by uid {}, not by the uid its name states", folder, info.st_uid);
    return std::nullopt;
  }
  return RankFolder{std::move(fd), folder + "/", uid};
}

std::optional<RankFolder> open_folder_of(const std::filesystem::path& rank_dir, std::string_view relative,
                                         std::string& leaf, std::string& problem) {
  auto root = open_rank_root(rank_dir, problem);
  if (!root) return std::nullopt;
  const auto slash = relative.find('/');
  leaf = std::string(relative.substr(slash == std::string_view::npos ? 0 : slash + 1));
  if (slash == std::string_view::npos) return root;
  return open_user_folder(root->fd.get(), relative.substr(0, slash), problem);
}

}  // namespace fragscope::agent
