#pragma once
/// @file training_log.h
/// @brief What a training job's log tells the doctor, read in one pass.
///
/// Three things a log can say about how the run ended, each read by its own parser:
/// - PyTorch's out-of-memory messages (oom_message_parser.h);
/// - a CUDA library that could not get memory of its own (library_alloc_failure.h);
/// - cuDNN finding no plan to run a convolution: "FIND was unable to find an engine to execute this computation"
///   (GET, or without either in older releases; "Unable to find a valid cuDNN algorithm to run convolution" from
///   the v7 API). ATen raises it when every candidate plan failed, and each plan fails when its workspace cannot
///   be allocated (snapshot/survived_oom.h): with a snapshot whose trace ends on such refusals, it says the run
///   died of them. Alone it says nothing of memory: an unsupported GPU or dtype ends the same way.
/// Logs are taken as they come (tracebacks, rank prefixes, colour codes); nothing is executed or evaluated.
/// Thread-safety: pure functions.

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

#include "inputs/library_alloc_failure.h"
#include "inputs/oom_message.h"

namespace fragscope::inputs {

struct TrainingLog {
  std::vector<OomMessage> oom_messages;               ///< the first kMaxOomMessages
  std::vector<LibraryAllocFailure> library_failures;  ///< the first kMaxLibraryAllocFailures
  std::optional<std::size_t> cudnn_no_plan_line;      ///< 1-based line of the last "unable to find an engine"
  std::optional<int> cudnn_no_plan_rank;              ///< that line's rank prefix ("[rank3]:"), if any

  /// @brief True when the log says something the doctor reads.
  bool any() const { return !oom_messages.empty() || !library_failures.empty() || cudnn_no_plan_line; }
};

/// @brief Whether `line` reports that cuDNN found no plan to run a convolution (above).
bool is_cudnn_no_plan_error(std::string_view line);

/// @brief Reads the log at `path` (a regular file or a pipe, of any size), streamed once: memory holds a few lines
/// (each cut at kMaxLogLineBytes, text_file.h), not the log.
/// @throws InputError naming `path` when it cannot be read or is a special file.
TrainingLog read_training_log_file(const std::filesystem::path& path);

}  // namespace fragscope::inputs
