#include "metrics/memory_totals.h"

#include <algorithm>

namespace fragscope::metrics {

using snapshot::BlockState;

double MemoryTotals::fragmentation_index() const {
  if (inactive_bytes == 0) return 0.0;
  return 1.0 - static_cast<double>(largest_free_block) / static_cast<double>(inactive_bytes);
}

void MemoryTotals::add(const snapshot::Segment& segment, std::span<const snapshot::Block> segment_blocks) {
  ++segments;
  reserved_bytes += segment.total_size;
  for (const auto& b : segment_blocks) {
    ++blocks;
    switch (b.state) {
      case BlockState::kActiveAllocated:
        allocated_bytes += b.size;
        requested_bytes += b.requested_size;
        // A requested size above the block's (never seen) would underflow: clamp.
        free_internal_bytes += b.size - std::min(b.size, b.requested_size);
        break;
      case BlockState::kActivePendingFree:
        free_external_bytes += b.size;
        pending_free_bytes += b.size;
        break;
      case BlockState::kInactive:
        free_external_bytes += b.size;
        inactive_bytes += b.size;
        ++inactive_blocks;
        largest_free_block = std::max(largest_free_block, b.size);
        break;
    }
  }
}

MemoryTotals compute_totals(const snapshot::Snapshot& snapshot,
                            const std::function<bool(const snapshot::Segment&)>& keep) {
  MemoryTotals totals;
  for (const auto& segment : snapshot.segments)
    if (!keep || keep(segment)) totals.add(segment, snapshot.blocks_of(segment));
  return totals;
}

}  // namespace fragscope::metrics
