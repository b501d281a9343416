#include "util/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "util/blocking_io.h"
#include "util/error.h"

namespace fragscope {

namespace {

[[noreturn]] void cannot_write(const std::string& path, std::string_view what, std::string_view reason) {
  throw InputError(fmt::format("{}: cannot write {} ({})", path, what, reason));
}

// Writes all of `content` to `fd`; the reason of the first failure, or empty.
std::string write_all(int fd, std::string_view content) {
  while (!content.empty()) {
    const ssize_t n = ::write(fd, content.data(), content.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? std::strerror(errno) : "nothing written";
    content.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

}  // namespace

std::optional<FileIdentity> identity_of(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return std::nullopt;
  return FileIdentity{static_cast<std::uint64_t>(info.st_dev), static_cast<std::uint64_t>(info.st_ino)};
}

void write_output_file(const std::string& path, std::string_view content, std::span<const FileIdentity> inputs,
                       std::string_view what) {
  struct stat info {};
  const bool exists = ::stat(path.c_str(), &info) == 0;
  if (exists) {
    const FileIdentity target{static_cast<std::uint64_t>(info.st_dev), static_cast<std::uint64_t>(info.st_ino)};
    if (std::find(inputs.begin(), inputs.end(), target) != inputs.end())
      throw InputError(fmt::format("{}: refusing to write {} onto an input", path, what));
    if (S_ISDIR(info.st_mode)) cannot_write(path, what, "is a directory");
    if (!S_ISREG(info.st_mode)) {  // a device or a pipe: written in place
      // Not waiting for a reader: a FIFO nobody reads is an error (ENXIO), not a hang.
      const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
      if (fd < 0) cannot_write(path, what, errno == ENXIO ? "a pipe no process reads" : std::strerror(errno));
      if (!make_blocking(fd)) {
        const int error = errno;
        ::close(fd);
        cannot_write(path, what, std::strerror(error));
      }
      const std::string failed = write_all(fd, content);
      const bool closed = ::close(fd) == 0;
      if (!failed.empty()) cannot_write(path, what, failed);
      if (!closed) cannot_write(path, what, std::strerror(errno));
      return;
    }
  }
  // The temporary goes where the target is (a symlink's target: the link is replaced by the
  // file it pointed to), so the rename stays on one file system.
  std::error_code ec;
  std::filesystem::path target(path);
  if (std::filesystem::is_symlink(target, ec)) target = std::filesystem::weakly_canonical(target, ec);
  const std::filesystem::path folder = target.has_parent_path() ? target.parent_path() : ".";
  std::string temporary = (folder / ("." + target.filename().string() + ".XXXXXX")).string();
  std::vector<char> name(temporary.begin(), temporary.end());
  name.push_back('\0');
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) cannot_write(path, what, std::strerror(errno));
  temporary = name.data();
  std::string failed = write_all(fd, content);
  if (failed.empty() && ::fsync(fd) != 0) failed = std::strerror(errno);
  // mkostemp makes the file 0600; a report is as readable as any file the user makes.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (failed.empty() && ::fchmod(fd, exists ? info.st_mode & 07777 : 0666 & ~mask) != 0) failed = std::strerror(errno);
  if (::close(fd) != 0 && failed.empty()) failed = std::strerror(errno);
  if (failed.empty() && ::rename(temporary.c_str(), target.c_str()) != 0) failed = std::strerror(errno);
  if (!failed.empty()) {
    ::unlink(temporary.c_str());
    cannot_write(path, what, failed);
  }
}

}  // namespace fragscope
