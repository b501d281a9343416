#pragma once
/// @file memory_curves.h
/// @brief Active and reserved bytes after every trace event, and their extremes over any
/// stretch of events in O(log n): what a timeline needs per pixel column, whatever the zoom.
///
/// Active bytes: requested bytes of the allocations alive after the event (allocation_table.h),
/// the curve memory_viz's Active Memory Timeline draws. Reserved bytes: the bytes of the
/// segments after the event: the end-state segments' bytes less what the trace's segment
/// events added, then walked forward (segment_alloc and segment_map add, segment_free and
/// segment_unmap release).
/// The extremes come from a pyramid over buckets of 64 events (each level halves the one below),
/// so a query reads at most 2 × 63 single events and two buckets per level.
/// Thread-safety: immutable after construction.

#include <cstdint>
#include <vector>

#include "snapshot/snapshot.h"
#include "view/allocation_table.h"

namespace fragscope::view {

/// @brief The extremes of both curves over a stretch of events.
struct CurveExtremes {
  std::uint64_t active_max = 0;
  std::uint32_t active_max_event = 0;  ///< the first event where active_max is reached
  std::uint64_t active_min = 0;
  std::uint64_t reserved_max = 0;
  std::uint64_t reserved_min = 0;
};

class MemoryCurves {
 public:
  MemoryCurves(const snapshot::Snapshot& snapshot, int device, const AllocationTable& allocations);

  std::uint32_t event_count() const { return static_cast<std::uint32_t>(active_.size()); }
  std::uint64_t active_after(std::uint32_t event) const { return active_[event]; }
  std::uint64_t reserved_after(std::uint32_t event) const { return reserved_[event]; }
  std::uint64_t initial_reserved() const { return initial_reserved_; }

  /// @brief Extremes over events [first, last]. REQUIRES: first <= last < event_count().
  CurveExtremes extremes(std::uint32_t first, std::uint32_t last) const;

 private:
  static constexpr unsigned kBucketBits = 6;
  void build_pyramid();

  std::vector<std::uint64_t> active_;
  std::vector<std::uint64_t> reserved_;
  std::vector<std::vector<CurveExtremes>> levels_;  ///< levels_[k]: buckets of 64 << k events
  std::uint64_t initial_reserved_ = 0;
};

}  // namespace fragscope::view
