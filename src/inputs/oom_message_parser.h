#pragma once
/// @file oom_message_parser.h
/// @brief Finds every PyTorch out-of-memory message in a log and parses its figures.
///
/// Logs are taken as they come: tracebacks around the message, ANSI colour codes, "\r",
/// torchrun rank prefixes ("[rank3]:", "[default3]:", mpirun's "[1,3]<stderr>:"), other ranks'
/// lines interleaved, and messages wrapped over several lines (continuation lines of the same
/// rank are joined until the message is complete). Nothing is executed or evaluated.
/// Thread-safety: pure functions.

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

#include "inputs/oom_message.h"

namespace fragscope::inputs {

/// @brief Messages kept per log: a crash loop repeats one message without end.
inline constexpr std::size_t kMaxOomMessages = 1000;

/// @brief Every OOM message in `log` (the first kMaxOomMessages), in order of their first lines. A log without one
/// gives an empty vector (not an error). A message whose figures cannot be read is still returned with only `line`,
/// `rank`, `backend` and `text` set.
std::vector<OomMessage> find_oom_messages(std::string_view log);

/// @brief Parses a single message text (one OOM, already joined on one line).
/// @return nullopt when `text` holds no "out of memory ... Tried to allocate" message.
std::optional<OomMessage> parse_oom_message(std::string_view text);

/// @brief Finds the OOM messages of the log at `path` (a regular file or a pipe, of any size),
/// streamed: memory holds a few lines (each cut at kMaxLogLineBytes, text_file.h), not the log.
/// @throws InputError naming `path` when it cannot be read or is a special file.
std::vector<OomMessage> read_oom_messages_file(const std::filesystem::path& path);

}  // namespace fragscope::inputs
