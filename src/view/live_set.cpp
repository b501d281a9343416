#include "view/live_set.h"

#include <algorithm>

namespace fragscope::view {

LiveSet::LiveSet(const AllocationTable& allocations) : allocations_(allocations) {
  const std::uint32_t events = allocations.event_count();
  const std::size_t checkpoints = (std::size_t{events} >> kStrideBits) + 1;
  // Each allocation is in the checkpoints its life spans: those at events in (start, end],
  // and every one from the first when it was allocated before the trace.
  std::vector<std::vector<AllocationId>> live(checkpoints);
  for (AllocationId id = 0; id < allocations.size(); ++id) {
    const Allocation& a = allocations[id];
    const std::size_t from = allocations.before_trace(id) ? 0 : (std::size_t{a.start} >> kStrideBits) + 1;
    const std::size_t to = std::min(checkpoints - 1, std::size_t{a.end} >> kStrideBits);
    for (std::size_t k = from; k <= to; ++k) live[k].push_back(id);
  }
  checkpoint_offsets_.push_back(0);
  for (const auto& ids : live) {
    checkpoint_ids_.insert(checkpoint_ids_.end(), ids.begin(), ids.end());
    checkpoint_offsets_.push_back(static_cast<std::uint32_t>(checkpoint_ids_.size()));
  }
}

std::vector<AllocationId> LiveSet::alive_during(std::uint32_t first, std::uint32_t last) const {
  const std::size_t k = first >> kStrideBits;
  const std::uint32_t checkpoint_event = static_cast<std::uint32_t>(k << kStrideBits);
  std::vector<AllocationId> result;
  for (std::uint32_t i = checkpoint_offsets_[k]; i < checkpoint_offsets_[k + 1]; ++i) {
    const AllocationId id = checkpoint_ids_[i];
    if (allocations_[id].end > first) result.push_back(id);
  }
  // Allocated from the checkpoint on: alive after `first` or allocated up to `last`.
  const auto in_trace_end = static_cast<AllocationId>(allocations_.size());
  for (AllocationId id = allocations_.first_allocated_from(checkpoint_event); id < in_trace_end; ++id) {
    const Allocation& a = allocations_[id];
    if (a.start > last) break;
    if (a.end > first && a.end > a.start) result.push_back(id);
  }
  return result;
}

std::vector<AllocationId> LiveSet::alive_after(std::uint32_t event) const { return alive_during(event, event); }

}  // namespace fragscope::view
