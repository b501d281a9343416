#include "diagnose/recorded_curve.h"

#include <algorithm>
#include <cstdint>

namespace fragscope::diagnose {
namespace {

using snapshot::TraceAction;

std::int64_t allocated_change(const snapshot::TraceEvent& event) {
  switch (event.action) {
    case TraceAction::kAlloc: return static_cast<std::int64_t>(event.size);
    case TraceAction::kFreeCompleted: return -static_cast<std::int64_t>(event.size);
    default: return 0;
  }
}

std::uint64_t clamp_to_zero(std::int64_t value) { return value < 0 ? 0 : static_cast<std::uint64_t>(value); }

}  // namespace

RecordedCurve walk_recorded_curve(const snapshot::Snapshot& snapshot, int device) {
  RecordedCurve curve;
  const auto trace = snapshot.trace(device);
  if (trace.empty()) return curve;
  std::int64_t final_allocated = 0;
  std::int64_t final_reserved = 0;
  for (const snapshot::Segment& segment : snapshot.segments) {
    if (segment.device != device) continue;
    final_reserved += static_cast<std::int64_t>(segment.total_size);
    for (const snapshot::Block& block : snapshot.blocks_of(segment))
      if (block.state != snapshot::BlockState::kInactive)
        final_allocated += static_cast<std::int64_t>(block.requested_size);
  }
  std::int64_t net_allocated = 0;
  std::int64_t net_reserved = 0;
  for (const snapshot::TraceEvent& event : trace) {
    net_allocated += allocated_change(event);
    net_reserved += reserved_bytes_change(event.action, event.size);
  }
  std::int64_t allocated = std::max<std::int64_t>(0, final_allocated - net_allocated);
  std::int64_t reserved = std::max<std::int64_t>(0, final_reserved - net_reserved);
  curve.allocated.reserve(trace.size());
  curve.reserved.reserve(trace.size());
  for (const snapshot::TraceEvent& event : trace) {
    allocated += allocated_change(event);
    reserved += reserved_bytes_change(event.action, event.size);
    curve.allocated.push_back(clamp_to_zero(allocated));
    curve.reserved.push_back(clamp_to_zero(reserved));
  }
  return curve;
}

std::vector<CurvePoint> downsample_curve(const RecordedCurve& curve, std::size_t points) {
  std::vector<CurvePoint> result;
  const std::size_t n = curve.allocated.size();
  if (n == 0 || points == 0) return result;
  const std::size_t buckets = std::min(points, n);
  for (std::size_t b = 0; b < buckets; ++b) {
    const std::size_t first = b * n / buckets;
    const std::size_t last = (b + 1) * n / buckets;  // exclusive
    CurvePoint point{last - 1, 0, 0, UINT64_MAX, UINT64_MAX};
    for (std::size_t i = first; i < last; ++i) {
      point.reserved = std::max(point.reserved, curve.reserved[i]);
      point.allocated = std::max(point.allocated, curve.allocated[i]);
      point.reserved_min = std::min(point.reserved_min, curve.reserved[i]);
      point.allocated_min = std::min(point.allocated_min, curve.allocated[i]);
    }
    result.push_back(point);
  }
  return result;
}

}  // namespace fragscope::diagnose
