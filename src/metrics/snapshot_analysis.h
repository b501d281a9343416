#pragma once
/// @file snapshot_analysis.h
/// @brief Everything `fragscope analyze` reports about one device of a snapshot.

#include <cstdint>
#include <optional>
#include <vector>

#include "metrics/allocation_sites.h"
#include "metrics/memory_totals.h"
#include "metrics/segment_map.h"
#include "metrics/trace_summary.h"
#include "snapshot/snapshot.h"

namespace fragscope::metrics {

/// @brief Totals of one (pool, stream) pair: fragmentation is per pool and per stream because
/// blocks are reused only within both.
struct PoolStreamTotals {
  snapshot::PoolKind pool = snapshot::PoolKind::kLarge;
  std::uint64_t stream = 0;
  /// (0, 0) the default pools; else a private pool (CUDA graph, torch.cuda.MemPool).
  std::pair<std::int64_t, std::int64_t> mem_pool{0, 0};
  MemoryTotals totals;
};

struct SnapshotAnalysis {
  int device = 0;
  bool device_picked = false;  ///< `device` was chosen as the one holding the memory, not asked for
  std::vector<int> devices;    ///< devices with segments or a trace
  MemoryTotals totals;       ///< all segments of `device`
  /// The segments of private pools (CUDA graphs, MemPools): their free blocks serve only their
  /// own pool's allocations.
  MemoryTotals private_pools;
  std::vector<PoolStreamTotals> by_pool_stream;
  std::uint64_t expandable_segments = 0;
  std::vector<AllocationSite> top_sites;
  TraceSummary trace;
  std::vector<SegmentRow> segment_map;
  /// The driver's free bytes at the last recorded OOM (the only driver reading a snapshot holds).
  std::optional<std::uint64_t> driver_free_bytes;
  /// The largest request that can succeed without a new cudaMalloc: the largest free block of
  /// the default pools (a private pool's serve only its graph's or MemPool's allocations).
  std::uint64_t largest_cached_allocation = 0;
  /// Reserved bytes when the trace began: end-state reserved minus the trace's net change.
  std::int64_t reserved_at_trace_start = 0;
  /// Highest reserved bytes within the trace (exact from its segment events).
  std::int64_t trace_peak_reserved = 0;
};

/// @brief Analyses device `device` of `snapshot`, keeping the `top_sites` largest sites.
SnapshotAnalysis analyze_snapshot(const snapshot::Snapshot& snapshot, int device,
                                  std::size_t top_sites = 10);

}  // namespace fragscope::metrics
