#pragma once
/// @file timeline_query.h
/// @brief What a timeline viewport draws: per pixel column, the extremes of both curves, and
/// the largest allocations alive there stacked in allocation order, as memory_viz's Active
/// Memory Timeline stacks them.
///
/// A column stands for the stretch of events it covers; its allocations are those alive after
/// the column's busiest event (where active bytes peak in it), so the stack's top is exactly the
/// column's peak. The `max_bands` allocations that cover the most of the picture (size × columns
/// alive) are drawn one by one, each at the height of the drawn allocations made before it; the
/// rest is one band on top (the remaining active bytes), as memory_viz summarises small tensors.
/// Zooming in draws smaller allocations one by one. A viewport of fewer than
/// kExhaustiveViewportEvents events weighs every allocation alive in it; a wider one weighs those
/// alive at 16 of its columns (the long-lived) and the largest by size (the short-lived peaks).
/// The answer's size is bounded: at most `columns` columns, and bands whose offsets change at
/// most about 200,000 times in all (fewer bands when they would change more often).
/// Thread-safety: a pure function of the index.

#include <cstdint>
#include <utility>
#include <vector>

#include "view/memory_curves.h"
#include "view/trace_index.h"

namespace fragscope::view {

/// @brief Below this many events a viewport weighs every allocation alive in it.
inline constexpr std::uint64_t kExhaustiveViewportEvents = std::uint64_t{1} << 18;

struct TimelineColumn {
  std::uint32_t first_event = 0;
  std::uint32_t last_event = 0;
  CurveExtremes extremes;  ///< its busiest event: extremes.active_max_event
  std::uint64_t drawn_bytes = 0;  ///< of the bands drawn at this column
};

/// @brief One allocation drawn as a band over consecutive columns.
struct TimelineBand {
  AllocationId allocation = kNoAllocation;
  std::uint64_t size = 0;
  std::uint32_t first_column = 0;
  std::uint32_t last_column = 0;
  /// (column, offset): the bytes below it from that column on, for each column where it changes.
  std::vector<std::pair<std::uint32_t, std::uint64_t>> offsets;
};

struct Timeline {
  std::uint32_t first_event = 0;
  std::uint32_t last_event = 0;
  std::vector<TimelineColumn> columns;
  std::vector<TimelineBand> bands;  ///< in allocation order (bottom of the stack first)
};

/// @brief The viewport over events [first, last] in `columns` columns (fewer when it holds
/// fewer events), with at most `max_bands` bands.
/// REQUIRES: first <= last < index.event_count(), columns > 0.
Timeline query_timeline(const TraceIndex& index, std::uint32_t first, std::uint32_t last, std::uint32_t columns,
                        std::uint32_t max_bands);

}  // namespace fragscope::view
