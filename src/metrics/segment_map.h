#pragma once
/// @file segment_map.h
/// @brief Each segment as a row of runs (allocated / rounding / pending / free), for drawing
/// the allocator's memory "seen from above" in text or HTML.

#include <cstdint>
#include <utility>
#include <vector>

#include "snapshot/snapshot.h"

namespace fragscope::metrics {

enum class RunKind : std::uint8_t { kAllocated, kPendingFree, kFree };

struct SegmentRun {
  RunKind kind = RunKind::kFree;
  std::uint64_t offset = 0;  ///< from the segment's start
  std::uint64_t size = 0;
  std::uint64_t requested = 0;  ///< for kAllocated: bytes the caller asked for
};

struct SegmentRow {
  std::size_t segment_index = 0;  ///< into Snapshot::segments
  std::uint64_t address = 0;
  /// `segment_pool_id`: (0, 0) the default pools, else a private pool (a CUDA graph's, a MemPool)
  /// whose free blocks serve only that pool's allocations.
  std::pair<std::int64_t, std::int64_t> pool_id{0, 0};
  std::uint64_t total_size = 0;
  std::uint64_t free_bytes = 0;  ///< inactive bytes in this segment
  std::uint64_t largest_free = 0;
  std::vector<SegmentRun> runs;  ///< adjacent blocks of the same kind merged
};

/// @brief Rows for the segments of `device`, in address order.
std::vector<SegmentRow> build_segment_map(const snapshot::Snapshot& snapshot, int device);

}  // namespace fragscope::metrics
