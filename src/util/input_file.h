#pragma once
/// @file input_file.h
/// @brief The one way every reader opens and reads an input file: regular files and pipes only,
/// in bounded memory, with one-line errors.
///
/// Why: a path may name anything. A device (/dev/zero) never ends, a FIFO without a writer
/// blocks `open`, /proc/kmsg blocks `read`, a socket cannot be read at all; and a text reader
/// that loads "the whole file" grows without bound on any of them. So:
/// - open_input() refuses directories, character and block devices, sockets and the pseudo files
///   of /proc and /sys ("PATH: cannot read: is a character device, not a file"); it opens a FIFO
///   without waiting for a writer (no writer: it reads as empty).
/// - read_bounded() reads a whole input up to a cap and refuses a larger one ("PATH: larger than
///   the 1.00 MiB a job spec may have"); the cap holds for pipes, whose size is unknown up front.
/// - LineReader streams an input line by line, holding one line (up to a cap) at a time.
/// Thread-safety: an InputFile or LineReader belongs to one thread.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fragscope {

/// @brief What kind of file a path names, for the checks and notes of directory walks.
enum class FileKind : std::uint8_t {
  kRegular,
  kDirectory,
  kFifo,
  kCharDevice,
  kBlockDevice,
  kSocket,
  kOther,
  kMissing
};

/// @brief The kind of `path` (symlinks followed); kMissing when it cannot be stat'ed.
FileKind file_kind(const std::string& path);

/// @brief "a directory", "a FIFO", "a character device", ... for messages.
std::string_view describe(FileKind kind);

/// @brief An open input (a regular file or a pipe). Closes itself; movable, not copyable.
class InputFile {
 public:
  InputFile() = default;
  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  /// @brief True for a regular file (it can be read again, or from any offset).
  bool regular() const { return regular_; }
  /// @brief The size of a regular file when opened; 0 for a pipe.
  std::uint64_t size() const { return size_; }
  /// @brief Device and inode, to tell whether an output would overwrite this input.
  std::uint64_t device() const { return device_; }
  std::uint64_t inode() const { return inode_; }
  /// @brief Up to out.size() bytes; 0 at the end. @throws InputError "PATH: read error: ...".
  std::size_t read(std::span<char> out);
  /// @brief Gives up ownership of the descriptor (the caller closes it).
  int release();

 private:
  friend InputFile open_input(const std::string& path);
  int fd_ = -1;
  std::string path_;
  bool regular_ = false;
  std::uint64_t size_ = 0;
  std::uint64_t device_ = 0;
  std::uint64_t inode_ = 0;
};

/// @brief Opens `path` for reading.
/// @throws InputError "PATH: cannot open: REASON" when it is missing or unreadable, "PATH: cannot
/// read: REASON" when it is a directory, a device, a socket or a file of /proc or /sys.
InputFile open_input(const std::string& path);

/// @brief The whole content of `path`, at most `max_bytes` bytes. `what` names the kind of
/// artifact in the error ("a job spec").
/// @throws InputError as open_input, or "PATH: larger than the SIZE WHAT may have".
std::string read_bounded(const std::string& path, std::uint64_t max_bytes, std::string_view what);

/// @brief Streams the lines of an input in bounded memory.
class LineReader {
 public:
  /// @brief What to do with a line longer than `max_line` bytes.
  enum class LongLines : std::uint8_t {
    kError,  ///< throw "PATH:LINE: line longer than N bytes"
    kCut,    ///< return its first `max_line` bytes as the line and skip the rest of it
  };
  /// @param max_bytes the most the input may hold in all (0: no limit); more is an InputError
  /// naming `what`.
  LineReader(InputFile file, std::size_t max_line, LongLines long_lines, std::uint64_t max_bytes,
             std::string_view what);

  /// @brief The next line, without its '\n' (a trailing '\r' is kept); valid until the next call.
  /// False at the end of the input.
  /// @throws InputError on read errors and the limits above.
  bool next(std::string_view& line);
  /// @brief 1-based number of the line next() returned last.
  std::size_t line_number() const { return line_number_; }
  /// @brief False when the line next() returned last ended without '\n' (the input ended inside
  /// it: a writer was killed mid-line) or was cut.
  bool line_complete() const { return complete_; }
  const InputFile& file() const { return file_; }

 private:
  bool fill();  // reads more bytes; false at the end

  InputFile file_;
  std::size_t max_line_;
  LongLines long_lines_;
  std::uint64_t max_bytes_;
  std::string what_;
  std::vector<char> buffer_;
  std::size_t begin_ = 0;  // unread bytes are buffer_[begin_, end_)
  std::size_t end_ = 0;
  std::uint64_t total_ = 0;
  bool eof_ = false;
  bool skip_rest_ = false;  // the line returned last was cut: skip to its end first
  std::size_t line_number_ = 0;
  bool complete_ = true;
};

}  // namespace fragscope
