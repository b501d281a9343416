#pragma once
/// @file event_log.h
/// @brief The file `--event-log` names: where the agent appends its JSON-lines events.

#include <array>
#include <filesystem>
#include <ostream>
#include <streambuf>

#include <nlohmann/json.hpp>

#include "agent/rank_folder.h"

namespace fragscope::agent {

/// @brief One event as a line of JSON, newline included. A file name is any bytes: invalid UTF-8
/// becomes U+FFFD instead of throwing (nlohmann's dump throws on it, which would end the agent).
std::string event_line(const nlohmann::json& event);

/// @brief An output stream appending to a file through a descriptor opened with O_WRONLY, O_APPEND,
/// O_CREAT (mode 0600), O_CLOEXEC, O_NOFOLLOW and O_NOCTTY: no process the agent starts inherits
/// it (std::ofstream sets no close-on-exec), and a link planted at the path is never followed.
/// What is written reaches the file at each flush (the agent flushes after its events) and on
/// destruction. Not thread-safe, as no std::ostream is.
class EventLogFile : public std::ostream {
 public:
  /// @throws InputError "PATH: cannot open the event log for appending: REASON" (a link at PATH
  /// is named as such).
  explicit EventLogFile(const std::filesystem::path& path);
  ~EventLogFile() override;

 private:
  /// Buffers what is written and hands it to write(2) when full or flushed.
  class AppendBuffer : public std::streambuf {
   public:
    explicit AppendBuffer(FileDescriptor fd);

   protected:
    int_type overflow(int_type next) override;
    int sync() override;

   private:
    bool write_out();

    FileDescriptor fd_;
    std::array<char, 8192> pending_{};
  };

  AppendBuffer buffer_;
};

}  // namespace fragscope::agent
