#pragma once
/// @file live_set.h
/// @brief The allocations alive after any event, from the live sets kept every 65,536 events
/// and the allocations made since: O(live + 65,536), however long the trace.
/// Thread-safety: immutable after construction.

#include <cstdint>
#include <vector>

#include "view/allocation_table.h"

namespace fragscope::view {

class LiveSet {
 public:
  explicit LiveSet(const AllocationTable& allocations);

  /// @brief Ids of the allocations alive after `event`, in id order (allocation order).
  /// REQUIRES: event < the trace's length.
  std::vector<AllocationId> alive_after(std::uint32_t event) const;

  /// @brief Ids of the allocations alive after at least one event of [first, last], in id
  /// order: those alive after `first` and those allocated in (first, last].
  std::vector<AllocationId> alive_during(std::uint32_t first, std::uint32_t last) const;

 private:
  static constexpr unsigned kStrideBits = 16;
  const AllocationTable& allocations_;
  /// Checkpoint k: the allocations alive before event k << kStrideBits (ids, in id order).
  std::vector<std::uint32_t> checkpoint_offsets_;
  std::vector<AllocationId> checkpoint_ids_;
};

}  // namespace fragscope::view
