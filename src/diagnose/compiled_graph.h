#pragma once
/// @file compiled_graph.h
/// @brief Did the failing malloc run in a graph torch.compile generated for the failing unit?
///
/// Inductor writes each compiled graph as a Python module named by the hash of its code
/// ("c" and 51 base-32 characters, e.g. `che5aee5wcetur5cfbkoljgaktwngomqux447tc7ejsy3ciiqu3e.py`,
/// under /tmp/torchinductor_<user>/ unless TORCHINDUCTOR_CACHE_DIR says otherwise), and the
/// trace records its `call` as a Python frame. When the failing malloc's innermost such frame
/// belongs to a module no allocation before the failing unit ran, the unit runs a graph compiled
/// anew (a recompilation for a new shape, a graph break that moved): its allocations are not
/// those of the earlier units, which then say nothing about its peak.
/// Thread-safety: a pure function.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "snapshot/snapshot.h"

namespace fragscope::diagnose {

struct CompiledAnew {
  std::string module;         ///< the generated module's file name: "che5aee….py"
  std::size_t first_event = 0;  ///< the first trace event with a frame in it (≥ the unit's start)
};

/// @brief Whether `file` (a frame's file name, with or without folders) is a module Inductor generated.
bool is_inductor_module(std::string_view file);

/// @brief The generated module of the `oom` entry's innermost generated frame, when no event
/// before `unit_start` has a frame in it; nullopt otherwise (or when the entry has no such frame).
/// REQUIRES: unit_start <= oom_index < snapshot.trace(device).size().
std::optional<CompiledAnew> compiled_anew(const snapshot::Snapshot& snapshot, int device, std::size_t oom_index,
                                          std::size_t unit_start);

}  // namespace fragscope::diagnose
