#pragma once
/// @file progress_callback.h
/// @brief How a snapshot read reports its progress (snapshot_reader.h, parallel_reader.h).

#include <cstdint>
#include <functional>

namespace fragscope::snapshot {

/// @brief Called now and then while reading, and once at the end with done == total: bytes of
/// the pickle consumed and their total when the input says it up front (a plain file, a zstd
/// frame with its content size), else bytes of the file consumed and the file's size.
using ProgressCallback = std::function<void(std::uint64_t done, std::uint64_t total)>;

}  // namespace fragscope::snapshot
