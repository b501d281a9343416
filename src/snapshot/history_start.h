#pragma once
/// @file history_start.h
/// @brief How a device's trace begins, told by the blocks live at the dump that are older than it.
///
/// PyTorch keeps two records: the trace (`device_traces`, a ring of `max_entries` events) and, per block, the frames
/// of its allocation (`frames`, kept while the block lives whenever history recorded stacks). A block live at the
/// dump whose address no `alloc` of the trace hands out was allocated before the trace's first event (its address
/// was taken all along). With frames, history was recording when it was allocated, so the trace has dropped events:
/// the ring wrapped. Without frames while the trace's own allocations have them, it predates
/// `_record_memory_history`: history began after the run had allocated it, unless the trace is as long as a ring
/// users size (a multiple of kRoundRingEntries): that one may have wrapped since, dropping only blocks freed before
/// the dump (field mamba_edge: history from step 4, a ring of 100,000 full).
/// Thread-safety: a pure function of an immutable snapshot.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "snapshot/snapshot.h"

namespace fragscope::snapshot {

/// max_entries as users pass it (100000 in PyTorch's docs, 10000, 1000000): a trace of a multiple of it may be a
/// full ring.
inline constexpr std::size_t kRoundRingEntries = 1000;

enum class HistoryStart : std::uint8_t {
  kAllocatorStart,  ///< no block live at the dump is older than the trace
  kStartedLate,     ///< the older blocks carry no frames, the trace's allocations do: history began after them
  kRingWrapped,     ///< an older block carries frames: allocated while recording, its event since dropped
  kUnknown,         ///< older blocks, and no frames to tell by (no stacks), or a trace a full ring's length
};

/// @brief The blocks live at the dump (allocated or pending free) whose address no `alloc` of `device`'s trace hands
/// out: older than the trace (see the file comment), in the snapshot's order.
std::vector<const Block*> blocks_older_than_trace(const Snapshot& snapshot, int device);

/// @brief How `device`'s trace begins (see the file comment).
HistoryStart history_start(const Snapshot& snapshot, int device);

}  // namespace fragscope::snapshot
