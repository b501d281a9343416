#pragma once
/// @file read_progress.h
/// @brief Progress of a snapshot read, for the reader's callback: pickle bytes read of the
/// pickle's size when the input says it up front (a plain file, a zstd frame that records its
/// size): that is the work; else bytes of the file read of its size.

#include <algorithm>
#include <cstdint>
#include <functional>

#include "snapshot/byte_source.h"
#include "snapshot/pickle_machine.h"
#include "snapshot/progress_callback.h"

namespace fragscope::snapshot {

/// @brief The machine's progress callback (empty without `progress`). `machine` is read when it
/// ticks: set it before the machine runs. `source` and `machine` must outlive the callback.
inline std::function<void()> machine_progress(const ProgressCallback& progress, const ByteSource& source,
                                              const pickle::Machine* const& machine, std::uint64_t input_size) {
  if (!progress) return {};
  return [&progress, &source, &machine, input_size, expected = source.expected_size()] {
    if (expected) progress(std::min(machine->offset(), expected), expected);
    else progress(source.input_consumed(), input_size);
  };
}

/// @brief The last tick: all of it read.
inline void report_read(const ProgressCallback& progress, std::uint64_t expected, std::uint64_t input_size) {
  if (progress) progress(expected ? expected : input_size, expected ? expected : input_size);
}

}  // namespace fragscope::snapshot
