#include "agent/event_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "util/blocking_io.h"
#include "util/error.h"

namespace fragscope::agent {
namespace {

FileDescriptor open_for_appending(const std::filesystem::path& path) {
  // Not waiting for a reader: a FIFO nobody reads is an error (ENXIO), not an agent that never starts.
  FileDescriptor fd(
      ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK, 0600));
  if (!fd || !make_blocking(fd.get())) {
    const std::string reason = errno == ELOOP    ? "a symbolic link (never followed)"
                               : errno == ENXIO ? "a pipe no process reads"
                                                : std::strerror(errno);
    throw InputError(fmt::format("{}: cannot open the event log for appending: {}", path.string(), reason));
  }
  return fd;
}

}  // namespace

std::string event_line(const nlohmann::json& event) {
  return event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + '\n';
}

EventLogFile::EventLogFile(const std::filesystem::path& path)
    : std::ostream(nullptr), buffer_(open_for_appending(path)) {
  rdbuf(&buffer_);
}

EventLogFile::~EventLogFile() { flush(); }

EventLogFile::AppendBuffer::AppendBuffer(FileDescriptor fd) : fd_(std::move(fd)) {
  setp(pending_.data(), pending_.data() + pending_.size());
}

EventLogFile::AppendBuffer::int_type EventLogFile::AppendBuffer::overflow(int_type next) {
  if (!write_out()) return traits_type::eof();
  if (!traits_type::eq_int_type(next, traits_type::eof())) {
    *pptr() = traits_type::to_char_type(next);
    pbump(1);
  }
  return traits_type::not_eof(next);
}

int EventLogFile::AppendBuffer::sync() { return write_out() ? 0 : -1; }

bool EventLogFile::AppendBuffer::write_out() {
  const char* next = pbase();
  while (next < pptr()) {
    const ssize_t written = ::write(fd_.get(), next, static_cast<std::size_t>(pptr() - next));
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return false;
    next += written;
  }
  setp(pending_.data(), pending_.data() + pending_.size());
  return true;
}

}  // namespace fragscope::agent
