#pragma once
/// @file trace_index.h
/// @brief Everything the view answers from, built once per snapshot (one device): the
/// allocations' lifetimes, the curves and their pyramid, the live sets, the segment history,
/// the allocation sites. Each query then costs O(pixel columns) or O(live blocks), not O(trace).
/// Thread-safety: immutable after construction; the snapshot must outlive it.

#include <optional>
#include <string>
#include <vector>

#include "snapshot/snapshot.h"
#include "view/allocation_table.h"
#include "view/live_set.h"
#include "view/memory_curves.h"
#include "view/segment_history.h"
#include "view/site_table.h"

namespace fragscope::view {

struct TraceIndex {
  /// @throws InputError naming `source` when `device` has no trace to view.
  TraceIndex(const snapshot::Snapshot& snapshot, int device, const std::string& source);

  const snapshot::Snapshot& snapshot;
  int device = 0;
  std::string source;
  AllocationTable allocations;
  MemoryCurves curves;
  LiveSet live;
  SegmentHistory segments;
  SiteTable sites;
  std::vector<std::uint32_t> ooms;  ///< the `oom` events, in order
  std::optional<std::uint32_t> last_oom;  ///< the last of them

  std::uint32_t event_count() const { return allocations.event_count(); }
  std::span<const snapshot::TraceEvent> trace() const { return snapshot.trace(device); }
};

}  // namespace fragscope::view
