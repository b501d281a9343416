#pragma once
/// @file memory_totals.h
/// @brief Where the reserved bytes of a snapshot are: allocated, rounding, gaps, the largest hole.
///
/// The arithmetic is `torch.cuda._memory_viz stats` (segsum), so the numbers match PyTorch's
/// own tool: reserved = allocated_requested + free_internal + free_external.

#include <cstdint>
#include <functional>
#include <span>

#include "snapshot/snapshot.h"

namespace fragscope::metrics {

struct MemoryTotals {
  std::uint64_t segments = 0;
  std::uint64_t blocks = 0;
  std::uint64_t reserved_bytes = 0;       ///< Σ segment total_size
  std::uint64_t allocated_bytes = 0;      ///< Σ size of active_allocated blocks (rounded)
  std::uint64_t requested_bytes = 0;      ///< Σ requested_size of active_allocated blocks
  std::uint64_t free_internal_bytes = 0;  ///< Σ (size − requested_size) of active_allocated blocks
  std::uint64_t free_external_bytes = 0;  ///< Σ size of every other block (inactive, pending free)
  std::uint64_t inactive_bytes = 0;       ///< Σ size of inactive blocks: free to hand out
  std::uint64_t pending_free_bytes = 0;   ///< Σ size of active_pending_free blocks
  std::uint64_t largest_free_block = 0;   ///< largest inactive block
  std::uint64_t inactive_blocks = 0;

  /// @brief 1 − largest_free_block / inactive_bytes: 0 when all free memory is one hole,
  /// near 1 when it is scattered in many small ones (RMM's arena definition). 0 when nothing is free.
  double fragmentation_index() const;
  void add(const snapshot::Segment& segment, std::span<const snapshot::Block> blocks);
};

/// @brief Totals over the segments for which `keep` returns true (all segments by default).
MemoryTotals compute_totals(const snapshot::Snapshot& snapshot,
                            const std::function<bool(const snapshot::Segment&)>& keep = {});

}  // namespace fragscope::metrics
