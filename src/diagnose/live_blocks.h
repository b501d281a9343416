#pragma once
/// @file live_blocks.h
/// @brief The blocks a trace allocated that are still live before one of its events.
/// Thread-safety: a pure function.

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>

#include "snapshot/snapshot.h"

namespace fragscope::diagnose {

/// @brief Address → allocating event of every block allocated before event `index` of `trace` and not freed
/// (completed) before it; blocks older than the trace are not in it.
std::unordered_map<std::uint64_t, std::size_t> live_blocks_before(std::span<const snapshot::TraceEvent> trace,
                                                                  std::size_t index);

}  // namespace fragscope::diagnose
