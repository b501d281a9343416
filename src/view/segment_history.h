#pragma once
/// @file segment_history.h
/// @brief The allocator's segments as they were after any trace event, with the blocks alive
/// in them: the "parking lot" at that moment (where the free bytes are, which blocks pin a
/// segment).
///
/// Segments: the end-state segments with every segment event of the trace undone (the state
/// before the first event), then the events up to the one asked for redone. Blocks: the
/// allocations alive then (live_set.h) at their traced addresses. A block alive at the end has
/// its end-state size (exact); any other is its request rounded up to 512 bytes, so a block the
/// allocator left unsplit (up to 1 MiB larger in the large pool) shows as a small free run
/// beside it, as in the doctor's map at the OOM.
/// Thread-safety: immutable after construction.

#include <cstdint>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "snapshot/snapshot.h"
#include "view/allocation_table.h"
#include "view/live_set.h"

namespace fragscope::view {

struct SegmentBlock {
  AllocationId allocation = kNoAllocation;
  std::uint64_t offset = 0;     ///< from the segment's start
  std::uint64_t size = 0;       ///< bytes it takes in the segment
  std::uint64_t requested = 0;  ///< bytes asked for
  bool pending_free = false;    ///< freed, waiting on other streams' events
};

struct SegmentState {
  std::uint64_t address = 0;
  std::uint64_t size = 0;
  std::uint64_t stream = 0;
  bool expandable = false;  ///< mapped pages of an expandable segment
  std::vector<SegmentBlock> blocks;  ///< address order
  std::uint64_t free_bytes = 0;      ///< size less the blocks
  std::uint64_t largest_free = 0;    ///< the largest run between blocks
};

class SegmentHistory {
 public:
  SegmentHistory(const snapshot::Snapshot& snapshot, int device, const AllocationTable& allocations,
                 const LiveSet& live);

  /// @brief The segments after `event`, address order, with their blocks.
  /// REQUIRES: event < the trace's length.
  std::vector<SegmentState> at(std::uint32_t event) const;

 private:
  struct SegmentEvent {
    std::uint32_t event = 0;
    snapshot::TraceAction action = snapshot::TraceAction::kSegmentAlloc;
    std::uint64_t address = 0;
    std::uint64_t size = 0;
    std::uint64_t stream = 0;
  };

  const AllocationTable& allocations_;
  const LiveSet& live_;
  std::vector<SegmentState> initial_;  ///< before the first event, no blocks
  std::vector<SegmentEvent> events_;   ///< the trace's segment events, in order
  absl::flat_hash_map<std::uint64_t, std::uint64_t> end_block_sizes_;  ///< address → size, live at the end
};

}  // namespace fragscope::view
