#include "replay/mem_pools.h"

#include <algorithm>
#include <map>

namespace fragscope::replay {

MemPoolMap::MemPoolMap(const snapshot::Snapshot& snapshot, int device, std::span<const snapshot::TraceEvent> trace)
    : trace_(trace) {
  // End-state private segments, by (address, size); each claims its newest segment_alloc.
  std::map<std::pair<std::uint64_t, std::uint64_t>, alloc::MemPoolId> pending;
  for (const snapshot::Segment& s : snapshot.segments) {
    if (s.device != device || s.pool_id == PoolIdPair{0, 0}) continue;
    const alloc::MemPoolId pool = dense(s.pool_id);
    if (s.is_expandable) {
      private_expandable_[s.address] = {s.total_size, pool};
    } else {
      pending[{s.address, s.total_size}] = pool;
    }
  }
  for (std::size_t i = trace.size(); i-- > 0 && !pending.empty();) {
    if (trace[i].action != snapshot::TraceAction::kSegmentAlloc) continue;
    const auto it = pending.find({trace[i].addr, trace[i].size});
    if (it == pending.end()) continue;
    private_allocs_[i] = it->second;
    pending.erase(it);
  }
  // The rest was allocated before the trace began: live from the start.
  for (const auto& [segment, pool] : pending) live_private_[segment.first] = {segment.second, pool};
}

alloc::MemPoolId MemPoolMap::dense(PoolIdPair id) {
  const auto it = std::find(pools_.begin(), pools_.end(), id);
  if (it != pools_.end()) return static_cast<alloc::MemPoolId>(it - pools_.begin());
  pools_.push_back(id);
  return static_cast<alloc::MemPoolId>(pools_.size() - 1);
}

void MemPoolMap::on_segment_event(std::size_t index) {
  const snapshot::TraceEvent& e = trace_[index];
  if (e.action == snapshot::TraceAction::kSegmentAlloc) {
    if (const auto it = private_allocs_.find(index); it != private_allocs_.end()) {
      live_private_[e.addr] = {e.size, it->second};
    }
  } else if (e.action == snapshot::TraceAction::kSegmentFree) {
    live_private_.erase(e.addr);
  }
}

alloc::MemPoolId MemPoolMap::in(const absl::btree_map<std::uint64_t, Range>& ranges, std::uint64_t address) {
  auto it = ranges.upper_bound(address);
  if (it == ranges.begin()) return alloc::kDefaultPool;
  --it;
  return address < it->first + it->second.size ? it->second.pool : alloc::kDefaultPool;
}

alloc::MemPoolId MemPoolMap::pool_of_block(std::uint64_t address, std::uint64_t stream) {
  if (live_private_.empty() && private_expandable_.empty()) [[likely]] return alloc::kDefaultPool;
  alloc::MemPoolId pool = in(live_private_, address);
  if (pool == alloc::kDefaultPool) pool = in(private_expandable_, address);
  last_pool_of_stream_[stream] = pool;
  return pool;
}

alloc::MemPoolId MemPoolMap::pool_of_oom(std::uint64_t stream) const {
  const auto it = last_pool_of_stream_.find(stream);
  return it == last_pool_of_stream_.end() ? alloc::kDefaultPool : it->second;
}

}  // namespace fragscope::replay
