#pragma once
/// @file segment_lot.h
/// @brief The segment map arranged as the HTML report's "parking lot": every segment one slot
/// as wide as its bytes, largest first, so the free bytes show where they are; and the free
/// bytes by the size of the hole they are in, to set against the failed request.
///
/// Segments too small to see on their own (under `resolution`-th of the reserved bytes) are
/// grouped with their neighbours in that order (of the same pool kind: default or private)
/// into one slot that keeps their count and totals: nothing is left out, however many there are.
/// Thread-safety: pure functions over the rows.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "metrics/segment_map.h"

namespace fragscope::report {

struct SegmentTotals {
  std::size_t segments = 0;
  std::uint64_t reserved_bytes = 0;
  std::uint64_t free_bytes = 0;          ///< cached, free inside PyTorch
  std::uint64_t pending_free_bytes = 0;  ///< freed, waiting on other streams
  std::uint64_t largest_free_bytes = 0;
};

/// @brief The sums over `rows`.
SegmentTotals segment_totals(std::span<const metrics::SegmentRow> rows);

struct LotSlot {
  const metrics::SegmentRow* row = nullptr;  ///< the segment, when the slot holds one alone
  std::size_t segments = 0;
  bool private_pool = false;  ///< a CUDA graph's or a MemPool's segments
  std::uint64_t total_bytes = 0;
  std::uint64_t free_bytes = 0;
  std::uint64_t pending_free_bytes = 0;
  std::uint64_t largest_free_bytes = 0;
  std::uint64_t smallest_segment_bytes = 0;
  std::uint64_t largest_segment_bytes = 0;
};

/// @brief Free runs of sizes in [low, high): how many and their bytes.
struct HoleBucket {
  std::uint64_t low = 0;
  std::uint64_t high = 0;
  std::size_t holes = 0;
  std::uint64_t bytes = 0;
};

struct SegmentLot {
  SegmentTotals totals;
  std::vector<LotSlot> slots;     ///< largest segment first; every segment in exactly one slot
  std::vector<HoleBucket> holes;  ///< power-of-two buckets from the smallest hole's to the largest's
};

/// @brief `rows` arranged as above.
SegmentLot arrange_segment_lot(std::span<const metrics::SegmentRow> rows, std::size_t resolution = 4096);

}  // namespace fragscope::report
