#pragma once
/// @file initial_state.h
/// @brief The allocator's state at the first trace event, walked back from the end-state
/// segments (pytorch-allocator.md §8): needed when the ring buffer started mid-run.
///
/// Segments: the snapshot's segments, with every segment event of the trace undone from the
/// last to the first (segment_alloc removes, segment_free re-adds, segment_map shrinks a mapped
/// run, segment_unmap grows one). Live blocks: end-state live blocks the trace never touches
/// (exact sizes), plus every address whose first event is a free (allocated before the trace).
/// A pre-existing block's size is its rounded request unless the allocator could not have
/// split off what follows it: a large-pool gap of at most 1 MiB (never split), or an oversize
/// block within max_non_split_rounding; such gaps belong to the block. Everything else in a
/// segment is free (free neighbours are always merged).

#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "alloc/alloc_config.h"
#include "alloc/allocator_model.h"
#include "snapshot/snapshot.h"

namespace fragscope::replay {

struct InitialState {
  std::vector<alloc::InitialSegment> segments;  ///< address order; live blocks address order
  std::uint64_t reserved = 0;                   ///< Σ segment sizes
  std::uint32_t anomalies = 0;  ///< blocks or segment events that fit nothing (lock races)
};

/// @brief Reconstructs the state before `trace[0]` for `device`.
/// @param stream_id maps a cudaStream_t value to the dense id the replay uses.
/// @param mem_pool_id maps a segment's `segment_pool_id` to the dense pool id the replay uses
///        (segments the trace's undo re-adds are the default pools').
InitialState reconstruct_initial_state(
    const snapshot::Snapshot& snapshot, int device, std::span<const snapshot::TraceEvent> trace,
    const alloc::AllocConfig& config, const std::function<alloc::StreamId(std::uint64_t)>& stream_id,
    const std::function<alloc::MemPoolId(std::pair<std::int64_t, std::int64_t>)>& mem_pool_id);

}  // namespace fragscope::replay
