#pragma once
/// @file mem_pools.h
/// @brief Which memory pool served each allocation of a trace: the device's default pools or a
/// private pool (a CUDA graph's, torch.compile reduce-overhead's, a torch.cuda.MemPool).
///
/// PyTorch 2.11's trace entries do not name the pool; the snapshot's segments do
/// (`segment_pool_id`, (0, 0) = default). A segment alive at the end belongs to its end-state
/// pool from its `segment_alloc` on (matched newest first by address and size, since addresses
/// are reused); a block belongs to the pool of the segment that holds it. Segments allocated
/// and freed within the trace belong to the default pools (a private pool gives its segments
/// back only once its graph is gone), and an expandable segment's address range belongs to the
/// pool of the end-state run inside it (each pool reserves ranges of its own). An `oom` entry
/// has no address: it gets the pool of the last block its stream allocated.
/// Thread-safety: none; used by one trace compilation.

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include <absl/container/btree_map.h>
#include <absl/container/flat_hash_map.h>

#include "alloc/allocator_model.h"
#include "snapshot/snapshot.h"

namespace fragscope::replay {

using PoolIdPair = std::pair<std::int64_t, std::int64_t>;  ///< PyTorch's MempoolId_t

class MemPoolMap {
 public:
  /// @param trace `device`'s trace in `snapshot`; both must outlive the map.
  MemPoolMap(const snapshot::Snapshot& snapshot, int device, std::span<const snapshot::TraceEvent> trace);

  /// @brief The dense id of a PyTorch pool id ((0, 0) → kDefaultPool), numbering new ones.
  alloc::MemPoolId dense(PoolIdPair id);
  /// @brief PyTorch's pool ids by dense id ([0] = (0, 0)).
  const std::vector<PoolIdPair>& pools() const { return pools_; }

  /// @brief Follows trace event `index` (call for every segment event, in trace order).
  void on_segment_event(std::size_t index);
  /// @brief The pool of a block at `address` allocated on `stream` now.
  alloc::MemPoolId pool_of_block(std::uint64_t address, std::uint64_t stream);
  /// @brief The pool an `oom` entry on `stream` asked (the last block that stream got).
  alloc::MemPoolId pool_of_oom(std::uint64_t stream) const;

 private:
  struct Range {
    std::uint64_t size = 0;
    alloc::MemPoolId pool = alloc::kDefaultPool;
  };
  static alloc::MemPoolId in(const absl::btree_map<std::uint64_t, Range>& ranges, std::uint64_t address);

  std::span<const snapshot::TraceEvent> trace_;
  std::vector<PoolIdPair> pools_{{0, 0}};
  absl::flat_hash_map<std::size_t, alloc::MemPoolId> private_allocs_;  // segment_alloc index → pool
  absl::btree_map<std::uint64_t, Range> live_private_;      // address → live private segment
  absl::btree_map<std::uint64_t, Range> private_expandable_;  // end-state private expandable runs
  absl::flat_hash_map<std::uint64_t, alloc::MemPoolId> last_pool_of_stream_;
};

}  // namespace fragscope::replay
