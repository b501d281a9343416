#pragma once
/// @file allocation_table.h
/// @brief Every block a device's trace shows, as one lifetime: when it was allocated, when
/// the free was asked for, when its memory went back to the cache; built once, read by every
/// view query.
///
/// "Alive after event i" is the active-memory timeline's notion (PyTorch's memory_viz): from
/// the `alloc` to the `free_completed` (a free waiting on other streams' events still holds
/// its memory). A block the trace never saw allocated was allocated before the trace began
/// (the ring buffer started mid-run): it is alive from the first event, with the stack of its
/// free or, when it outlives the trace, the end-state block's stack and requested size.
/// Sizes are the requested bytes, as the trace records them (memory_viz draws these too).
///
/// Invariants: allocations [0, before_trace_count) were allocated before the trace (start 0),
/// in address order of discovery; the rest are in the order of their `alloc` events, so their
/// starts increase with the id.
/// Thread-safety: immutable after construction.

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "snapshot/snapshot.h"

namespace fragscope::view {

using AllocationId = std::uint32_t;
inline constexpr AllocationId kNoAllocation = std::numeric_limits<AllocationId>::max();
inline constexpr std::uint32_t kNoEvent = std::numeric_limits<std::uint32_t>::max();

struct Allocation {
  std::uint64_t address = 0;
  std::uint64_t size = 0;       ///< requested bytes
  std::uint32_t start = 0;      ///< its `alloc` event (0 when allocated before the trace)
  std::uint32_t end = 0;        ///< its `free_completed` event; the trace's length when never freed
  std::uint32_t free_requested = kNoEvent;  ///< its `free_requested` event, when there was one
  snapshot::StackId stack = 0;  ///< frames of the alloc (before the trace: of the free, or the block's)

  /// @brief Holds memory after event `event`.
  bool alive_after(std::uint32_t event) const { return start <= event && event < end; }
};

class AllocationTable {
 public:
  /// @brief Reads `device`'s trace of `snapshot` (and its end-state blocks).
  AllocationTable(const snapshot::Snapshot& snapshot, int device);

  std::span<const Allocation> allocations() const { return allocations_; }
  const Allocation& operator[](AllocationId id) const { return allocations_[id]; }
  std::size_t size() const { return allocations_.size(); }
  std::uint32_t event_count() const { return event_count_; }
  std::size_t before_trace_count() const { return before_trace_count_; }
  bool before_trace(AllocationId id) const { return id < before_trace_count_; }

  /// @brief The allocation an `alloc`, `free_requested` or `free_completed` event belongs to,
  /// else kNoAllocation.
  AllocationId at_event(std::uint32_t event) const { return event_allocation_[event]; }
  /// @brief The first allocation (by id) whose `alloc` event is at or after `event`.
  AllocationId first_allocated_from(std::uint32_t event) const;

  /// @brief Requested bytes alive before the first event (allocated before the trace).
  std::uint64_t initial_active_bytes() const { return initial_active_bytes_; }
  /// @brief Ids ordered by size, largest first (ties by id).
  std::span<const AllocationId> by_size() const { return by_size_; }

 private:
  std::vector<Allocation> allocations_;
  std::vector<AllocationId> event_allocation_;
  std::vector<AllocationId> by_size_;
  std::size_t before_trace_count_ = 0;
  std::uint32_t event_count_ = 0;
  std::uint64_t initial_active_bytes_ = 0;
};

}  // namespace fragscope::view
