#include "metrics/snapshot_analysis.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace fragscope::metrics {

SnapshotAnalysis analyze_snapshot(const snapshot::Snapshot& snapshot, int device,
                                  std::size_t top_sites) {
  SnapshotAnalysis a;
  a.device = device;
  std::set<int> devices;
  std::map<std::tuple<std::pair<std::int64_t, std::int64_t>, int, std::uint64_t>, PoolStreamTotals> groups;
  MemoryTotals default_pools;
  for (const auto& segment : snapshot.segments) {
    devices.insert(segment.device);
    if (segment.device != device) continue;
    const auto blocks = snapshot.blocks_of(segment);
    a.totals.add(segment, blocks);
    auto& group = groups[{segment.pool_id, static_cast<int>(segment.pool), segment.stream}];
    group.pool = segment.pool;
    group.stream = segment.stream;
    group.mem_pool = segment.pool_id;
    (segment.pool_id == std::pair<std::int64_t, std::int64_t>{0, 0} ? default_pools : a.private_pools)
        .add(segment, blocks);
    group.totals.add(segment, blocks);
    if (segment.is_expandable) ++a.expandable_segments;
  }
  for (std::size_t d = 0; d < snapshot.device_traces.size(); ++d)
    if (!snapshot.device_traces[d].empty()) devices.insert(static_cast<int>(d));
  a.devices.assign(devices.begin(), devices.end());
  for (auto& [key, group] : groups) a.by_pool_stream.push_back(group);
  a.top_sites = top_allocation_sites(snapshot, device, top_sites);
  a.trace = summarize_trace(snapshot, device);
  a.segment_map = build_segment_map(snapshot, device);
  if (!a.trace.ooms.empty()) a.driver_free_bytes = a.trace.ooms.back().device_free_bytes;
  a.largest_cached_allocation = default_pools.largest_free_block;
  a.reserved_at_trace_start =
      static_cast<std::int64_t>(a.totals.reserved_bytes) - a.trace.net_reserved_change;
  a.trace_peak_reserved = a.reserved_at_trace_start + a.trace.peak_reserved_rise;
  return a;
}

}  // namespace fragscope::metrics
