#include "view/allocation_table.h"

#include <algorithm>
#include <numeric>

#include <absl/container/flat_hash_map.h>

namespace fragscope::view {
namespace {

using snapshot::TraceAction;

// While reading, allocations made before the trace are numbered apart (this bit set), since
// their final ids come first.
constexpr AllocationId kBeforeTraceBit = AllocationId{1} << 31;

}  // namespace

AllocationTable::AllocationTable(const snapshot::Snapshot& snapshot, int device) {
  const auto trace = snapshot.trace(device);
  event_count_ = static_cast<std::uint32_t>(trace.size());
  event_allocation_.assign(trace.size(), kNoAllocation);
  std::vector<Allocation> in_trace;
  std::vector<Allocation> before;
  absl::flat_hash_map<std::uint64_t, AllocationId> live;  // address → provisional id
  const auto at = [&](AllocationId id) -> Allocation& {
    return (id & kBeforeTraceBit) ? before[id & ~kBeforeTraceBit] : in_trace[id];
  };
  // The live allocation at `event`'s address, made a before-trace one when there is none.
  const auto holder = [&](const snapshot::TraceEvent& event) {
    const auto [it, inserted] = live.try_emplace(event.addr, kNoAllocation);
    if (inserted) {
      it->second = static_cast<AllocationId>(before.size()) | kBeforeTraceBit;
      before.push_back({event.addr, event.size, 0, event_count_, kNoEvent, event.stack});
    }
    return it;
  };
  for (std::uint32_t i = 0; i < event_count_; ++i) {
    const snapshot::TraceEvent& event = trace[i];
    switch (event.action) {
      case TraceAction::kAlloc: {
        const auto id = static_cast<AllocationId>(in_trace.size());
        in_trace.push_back({event.addr, event.size, i, event_count_, kNoEvent, event.stack});
        const auto [it, inserted] = live.try_emplace(event.addr, id);
        if (!inserted) {  // the free of the block before was not recorded (a ring-buffer race)
          at(it->second).end = i;
          it->second = id;
        }
        event_allocation_[i] = id;
        break;
      }
      case TraceAction::kFreeRequested: {
        const auto it = holder(event);
        at(it->second).free_requested = i;
        event_allocation_[i] = it->second;
        break;
      }
      case TraceAction::kFreeCompleted: {
        const auto it = holder(event);
        at(it->second).end = i;
        event_allocation_[i] = it->second;
        live.erase(it);
        break;
      }
      default: break;
    }
  }
  // End-state blocks the trace never touched: allocated before it, alive after it.
  for (const snapshot::Segment& segment : snapshot.segments) {
    if (segment.device != device) continue;
    for (const snapshot::Block& block : snapshot.blocks_of(segment)) {
      if (block.state == snapshot::BlockState::kInactive || live.contains(block.address)) continue;
      const bool pending = block.state == snapshot::BlockState::kActivePendingFree;
      before.push_back({block.address, block.requested_size, 0, event_count_, pending ? 0 : kNoEvent, block.stack});
    }
  }

  before_trace_count_ = before.size();
  const auto shift = static_cast<AllocationId>(before.size());
  for (AllocationId& id : event_allocation_) {
    if (id == kNoAllocation) continue;
    id = (id & kBeforeTraceBit) ? id & ~kBeforeTraceBit : id + shift;
  }
  for (const Allocation& allocation : before) initial_active_bytes_ += allocation.size;
  allocations_.reserve(before.size() + in_trace.size());
  allocations_.insert(allocations_.end(), before.begin(), before.end());
  allocations_.insert(allocations_.end(), in_trace.begin(), in_trace.end());
  by_size_.resize(allocations_.size());
  std::iota(by_size_.begin(), by_size_.end(), AllocationId{0});
  std::stable_sort(by_size_.begin(), by_size_.end(),
                   [this](AllocationId a, AllocationId b) { return allocations_[a].size > allocations_[b].size; });
}

AllocationId AllocationTable::first_allocated_from(std::uint32_t event) const {
  const auto first = allocations_.begin() + static_cast<std::ptrdiff_t>(before_trace_count_);
  const auto it = std::lower_bound(first, allocations_.end(), event,
                                   [](const Allocation& a, std::uint32_t e) { return a.start < e; });
  return static_cast<AllocationId>(it - allocations_.begin());
}

}  // namespace fragscope::view
