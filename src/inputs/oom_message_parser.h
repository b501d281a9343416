#pragma once
/// @file oom_message_parser.h
/// @brief Finds every PyTorch out-of-memory message in a log and parses its figures.
///
/// Logs are taken as they come: tracebacks around the message, ANSI colour codes, "\r",
/// torchrun rank prefixes ("[rank3]:", "[default3]:", mpirun's "[1,3]<stderr>:"), other ranks'
/// lines interleaved, and messages wrapped over several lines (continuation lines of the same
/// rank are joined until the message is complete). Nothing is executed or evaluated.
/// Thread-safety: pure functions.

#include <array>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
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

/// @brief The rank a launcher's prefix gives `line` ("[rank3]:", "[default3]:", "[1,3]<stderr>:"), if any.
std::optional<int> rank_prefix_of(std::string_view line);

/// @brief Parses a single message text (one OOM, already joined on one line).
/// @return nullopt when `text` holds no "out of memory ... Tried to allocate" message.
std::optional<OomMessage> parse_oom_message(std::string_view text);

/// @brief A wrapped message spans a handful of lines; more than this is not one message.
inline constexpr std::size_t kMaxContinuationLines = 12;

/// @brief Finds the messages of a log given line by line (training_log.h streams a file through it), holding only
/// the last few lines: each line is judged once the kMaxContinuationLines after it (its possible continuations)
/// have arrived. Not thread-safe: one reader feeds it.
class OomMessageScanner {
 public:
  void add(std::string_view line);
  /// @brief Judges the lines still held and returns every message found (the first kMaxOomMessages).
  std::vector<OomMessage> finish();

 private:
  const std::string& at(std::size_t i) const;
  void judge_first();
  void judge(std::string_view raw);

  std::array<std::string, kMaxContinuationLines + 1> ring_;  // a line and its possible continuations
  std::size_t first_ = 0;
  std::size_t count_ = 0;
  std::size_t line_no_ = 1;  // of the ring's first line
  std::vector<OomMessage> found_;
};

}  // namespace fragscope::inputs
