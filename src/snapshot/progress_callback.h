#pragma once
/// @file progress_callback.h
/// @brief How a snapshot read reports its progress (snapshot_reader.h, parallel_reader.h).

#include <cstdint>
#include <functional>
#include <string>

#include "util/progress.h"

namespace fragscope::snapshot {

/// @brief Called now and then while reading, and once at the end with done == total: bytes of
/// the pickle consumed and their total when the input says it up front (a plain file, a zstd
/// frame with its content size), else bytes of the file consumed and the file's size.
using ProgressCallback = std::function<void(std::uint64_t done, std::uint64_t total)>;

/// @brief The reader's callback for the task "reading PATH" of `progress`, counted in bytes
/// (empty when `progress` is). `progress` must outlive it.
inline ProgressCallback read_progress(const Progress& progress, const std::string& path) {
  if (!progress) return {};
  return [&progress, task = "reading " + path](std::uint64_t done, std::uint64_t total) {
    progress({task, "bytes", done, total});
  };
}

}  // namespace fragscope::snapshot
