#include "view/memory_curves.h"

#include <algorithm>

namespace fragscope::view {
namespace {

using snapshot::TraceAction;

/// `b` folded into `a`; ties of the active maximum keep the earlier event.
void fold(CurveExtremes& a, const CurveExtremes& b) {
  if (b.active_max > a.active_max || (b.active_max == a.active_max && b.active_max_event < a.active_max_event)) {
    a.active_max = b.active_max;
    a.active_max_event = b.active_max_event;
  }
  a.active_min = std::min(a.active_min, b.active_min);
  a.reserved_max = std::max(a.reserved_max, b.reserved_max);
  a.reserved_min = std::min(a.reserved_min, b.reserved_min);
}

}  // namespace

MemoryCurves::MemoryCurves(const snapshot::Snapshot& snapshot, int device, const AllocationTable& allocations) {
  const auto trace = snapshot.trace(device);
  std::int64_t end_reserved = 0;
  for (const snapshot::Segment& segment : snapshot.segments) {
    if (segment.device == device) end_reserved += static_cast<std::int64_t>(segment.total_size);
  }
  std::int64_t net_change = 0;
  for (const snapshot::TraceEvent& event : trace) net_change += reserved_bytes_change(event.action, event.size);
  initial_reserved_ = static_cast<std::uint64_t>(std::max<std::int64_t>(0, end_reserved - net_change));

  active_.resize(trace.size());
  reserved_.resize(trace.size());
  std::int64_t active = static_cast<std::int64_t>(allocations.initial_active_bytes());
  std::int64_t reserved = static_cast<std::int64_t>(initial_reserved_);
  for (std::uint32_t i = 0; i < trace.size(); ++i) {
    const snapshot::TraceEvent& event = trace[i];
    const AllocationId id = allocations.at_event(i);
    if (id != kNoAllocation) {
      const Allocation& allocation = allocations[id];
      if (event.action == TraceAction::kAlloc) active += static_cast<std::int64_t>(allocation.size);
      if (event.action == TraceAction::kFreeCompleted) active -= static_cast<std::int64_t>(allocation.size);
    }
    reserved += reserved_bytes_change(event.action, event.size);
    active_[i] = static_cast<std::uint64_t>(std::max<std::int64_t>(0, active));
    reserved_[i] = static_cast<std::uint64_t>(std::max<std::int64_t>(0, reserved));
  }
  build_pyramid();
}

void MemoryCurves::build_pyramid() {
  const std::size_t buckets = (active_.size() >> kBucketBits);  // whole buckets only
  std::vector<CurveExtremes> level(buckets);
  for (std::size_t b = 0; b < buckets; ++b) {
    const auto first = static_cast<std::uint32_t>(b << kBucketBits);
    CurveExtremes e{active_[first], first, active_[first], reserved_[first], reserved_[first]};
    for (std::uint32_t i = first + 1; i < first + (1u << kBucketBits); ++i) {
      fold(e, {active_[i], i, active_[i], reserved_[i], reserved_[i]});
    }
    level[b] = e;
  }
  while (!level.empty()) {
    std::vector<CurveExtremes> up((level.size() + 1) / 2);
    for (std::size_t i = 0; i < up.size(); ++i) {
      up[i] = level[2 * i];
      if (2 * i + 1 < level.size()) fold(up[i], level[2 * i + 1]);
    }
    levels_.push_back(std::move(level));
    if (up.size() == 1 && levels_.back().size() == 1) break;
    level = std::move(up);
  }
}

CurveExtremes MemoryCurves::extremes(std::uint32_t first, std::uint32_t last) const {
  CurveExtremes result{active_[first], first, active_[first], reserved_[first], reserved_[first]};
  const auto single = [&](std::uint32_t i) { fold(result, {active_[i], i, active_[i], reserved_[i], reserved_[i]}); };
  const std::uint64_t end = std::uint64_t{last} + 1;
  constexpr std::uint64_t kBucket = 1u << kBucketBits;
  std::uint64_t l = (std::uint64_t{first} + kBucket - 1) >> kBucketBits;  // first whole bucket
  std::uint64_t r = end >> kBucketBits;                                    // past the last whole one
  if (l >= r) {
    for (std::uint32_t i = first + 1; i <= last; ++i) single(i);
    return result;
  }
  for (std::uint64_t i = first + 1; i < (l << kBucketBits); ++i) single(static_cast<std::uint32_t>(i));
  for (std::uint64_t i = r << kBucketBits; i < end; ++i) single(static_cast<std::uint32_t>(i));
  for (std::size_t k = 0; l < r && k < levels_.size(); ++k, l >>= 1, r >>= 1) {
    if (l & 1) fold(result, levels_[k][l++]);
    if (r & 1) fold(result, levels_[k][--r]);
  }
  return result;
}

}  // namespace fragscope::view
