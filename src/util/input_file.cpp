#include "util/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "util/blocking_io.h"
#include "util/bytes.h"
#include "util/error.h"

namespace fragscope {

namespace {

constexpr std::size_t kReadChunk = std::size_t{1} << 20;

FileKind kind_of(mode_t mode) {
  if (S_ISREG(mode)) return FileKind::kRegular;
  if (S_ISDIR(mode)) return FileKind::kDirectory;
  if (S_ISFIFO(mode)) return FileKind::kFifo;
  if (S_ISCHR(mode)) return FileKind::kCharDevice;
  if (S_ISBLK(mode)) return FileKind::kBlockDevice;
  if (S_ISSOCK(mode)) return FileKind::kSocket;
  return FileKind::kOther;
}

[[noreturn]] void cannot_read(const std::string& path, std::string_view reason) {
  throw InputError(fmt::format("{}: cannot read: {}", path, reason));
}

[[noreturn]] void cannot_open(const std::string& path) {
  throw InputError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
}

// Refuses what is not a regular file or a pipe, naming what it is.
void check_kind(const std::string& path, FileKind kind) {
  if (kind == FileKind::kRegular || kind == FileKind::kFifo) return;
  if (kind == FileKind::kDirectory) cannot_read(path, "is a directory");
  cannot_read(path, fmt::format("is {}, not a file", describe(kind)));
}

// Pseudo file systems: their "regular" files are kernel interfaces (/proc/kmsg blocks a read,
// /proc/kcore claims 128 TiB), never a training artifact.
bool on_pseudo_file_system(int fd) {
  struct statfs fs {};
  if (::fstatfs(fd, &fs) != 0) return false;
  switch (static_cast<unsigned long>(fs.f_type)) {
    case 0x9fa0:      // procfs
    case 0x62656572:  // sysfs
    case 0x64626720:  // debugfs
    case 0x74726163:  // tracefs
    case 0x73636673:  // securityfs
    case 0x27e0eb:    // cgroup
    case 0x63677270:  // cgroup2
      return true;
    default:
      return false;
  }
}

}  // namespace

FileKind file_kind(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return FileKind::kMissing;
  return kind_of(info.st_mode);
}

std::string_view describe(FileKind kind) {
  switch (kind) {
    case FileKind::kRegular: return "a regular file";
    case FileKind::kDirectory: return "a directory";
    case FileKind::kFifo: return "a FIFO";
    case FileKind::kCharDevice: return "a character device";
    case FileKind::kBlockDevice: return "a block device";
    case FileKind::kSocket: return "a socket";
    case FileKind::kOther: return "a special file";
    case FileKind::kMissing: break;
  }
  return "missing";
}

InputFile::InputFile(InputFile&& other) noexcept { *this = std::move(other); }

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    regular_ = other.regular_;
    size_ = other.size_;
    device_ = other.device_;
    inode_ = other.inode_;
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

int InputFile::release() { return std::exchange(fd_, -1); }

std::size_t InputFile::read(std::span<char> out) {
  for (;;) {
    const ssize_t n = ::read(fd_, out.data(), out.size());
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno != EINTR) throw InputError(fmt::format("{}: read error: {}", path_, std::strerror(errno)));
  }
}

InputFile open_input(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) cannot_open(path);
  check_kind(path, kind_of(info.st_mode));
  // O_NONBLOCK: opening a FIFO does not wait for a writer. O_NOCTTY: never a controlling terminal.
  InputFile file;
  file.path_ = path;
  file.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (file.fd_ < 0) cannot_open(path);
  if (::fstat(file.fd_, &info) != 0) cannot_open(path);
  check_kind(path, kind_of(info.st_mode));  // what was opened, should the path have changed
  file.regular_ = S_ISREG(info.st_mode);
  if (file.regular_ && on_pseudo_file_system(file.fd_))
    cannot_read(path, "is a file of /proc or /sys, not an artifact");
  if (!make_blocking(file.fd_)) cannot_open(path);
  file.size_ = file.regular_ ? static_cast<std::uint64_t>(info.st_size) : 0;
  file.device_ = static_cast<std::uint64_t>(info.st_dev);
  file.inode_ = static_cast<std::uint64_t>(info.st_ino);
  return file;
}

std::string read_bounded(const std::string& path, std::uint64_t max_bytes, std::string_view what) {
  InputFile file = open_input(path);
  auto too_large = [&] {
    return InputError(fmt::format("{}: larger than the {} {} may have", path, format_bytes(max_bytes), what));
  };
  if (file.size() > max_bytes) throw too_large();
  std::string bytes;
  bytes.reserve(static_cast<std::size_t>(file.size()));
  for (;;) {
    const std::size_t at = bytes.size();
    // Read one byte past the cap to tell "exactly the cap" from "more".
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(kReadChunk, max_bytes + 1 - at));
    bytes.resize(at + want);
    const std::size_t n = file.read(std::span(bytes.data() + at, want));
    bytes.resize(at + n);
    if (n == 0) return bytes;
    if (bytes.size() > max_bytes) throw too_large();
  }
}

LineReader::LineReader(InputFile file, std::size_t max_line, LongLines long_lines, std::uint64_t max_bytes,
                       std::string_view what)
    : file_(std::move(file)), max_line_(max_line), long_lines_(long_lines), max_bytes_(max_bytes), what_(what) {}

bool LineReader::fill() {
  if (eof_) return false;
  if (begin_ > 0) {  // keep only the unread bytes, at the front
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (buffer_.size() - end_ < kReadChunk) buffer_.resize(end_ + kReadChunk);
  const std::size_t n = file_.read(std::span(buffer_.data() + end_, buffer_.size() - end_));
  if (n == 0) {
    eof_ = true;
    return false;
  }
  end_ += n;
  total_ += n;
  if (max_bytes_ && total_ > max_bytes_)
    throw InputError(fmt::format("{}: larger than the {} {} may have", file_.path(), format_bytes(max_bytes_), what_));
  return true;
}

bool LineReader::next(std::string_view& line) {
  while (skip_rest_) {  // the rest of a line that was cut
    const auto* newline = static_cast<const char*>(std::memchr(buffer_.data() + begin_, '\n', end_ - begin_));
    if (newline) {
      begin_ = static_cast<std::size_t>(newline - buffer_.data()) + 1;
      skip_rest_ = false;
    } else {
      begin_ = end_;
      if (!fill()) return false;
    }
  }
  for (;;) {
    const char* start = buffer_.data() + begin_;
    const auto* newline = static_cast<const char*>(std::memchr(start, '\n', end_ - begin_));
    const std::size_t length = newline ? static_cast<std::size_t>(newline - start) : end_ - begin_;
    if (length > max_line_) {
      if (long_lines_ == LongLines::kError)
        throw InputError(fmt::format("{}:{}: line longer than {} bytes", file_.path(), line_number_ + 1, max_line_));
      line = std::string_view(start, max_line_);
      ++line_number_;
      complete_ = false;
      begin_ = newline ? static_cast<std::size_t>(newline - buffer_.data()) + 1 : end_;
      skip_rest_ = newline == nullptr;
      return true;
    }
    if (newline || (eof_ && length > 0)) {
      line = std::string_view(start, length);
      ++line_number_;
      complete_ = newline != nullptr;
      begin_ += length + (newline ? 1 : 0);
      return true;
    }
    if (!fill() && begin_ == end_) return false;
  }
}

}  // namespace fragscope
