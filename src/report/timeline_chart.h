#pragma once
/// @file timeline_chart.h
/// @brief A small text chart of reserved and allocated bytes over a replay, readable in a
/// terminal at a glance: '█' allocated, '░' reserved but not allocated (cached), one column
/// per timeline point.

#include <ostream>
#include <span>

#include "replay/replay_engine.h"

namespace fragscope::report {

/// @brief Draws `points` in `rows` text rows, with the byte scale on the left and the trace
/// event range below.
void write_timeline_chart(std::ostream& out, std::span<const replay::TimelinePoint> points,
                          int rows = 8);

}  // namespace fragscope::report
