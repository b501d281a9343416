#include "metrics/segment_map.h"

#include <algorithm>

namespace fragscope::metrics {

namespace {

RunKind kind_of(snapshot::BlockState state) {
  switch (state) {
    case snapshot::BlockState::kActiveAllocated: return RunKind::kAllocated;
    case snapshot::BlockState::kActivePendingFree: return RunKind::kPendingFree;
    case snapshot::BlockState::kInactive: break;
  }
  return RunKind::kFree;
}

}  // namespace

std::vector<SegmentRow> build_segment_map(const snapshot::Snapshot& snapshot, int device) {
  std::vector<SegmentRow> rows;
  for (std::size_t i = 0; i < snapshot.segments.size(); ++i) {
    const auto& segment = snapshot.segments[i];
    if (segment.device != device) continue;
    SegmentRow row;
    row.segment_index = i;
    row.address = segment.address;
    row.pool_id = segment.pool_id;
    row.total_size = segment.total_size;
    std::uint64_t offset = 0;
    for (const auto& block : snapshot.blocks_of(segment)) {
      const RunKind kind = kind_of(block.state);
      if (kind == RunKind::kFree) {
        row.free_bytes += block.size;
        row.largest_free = std::max(row.largest_free, block.size);
      }
      const std::uint64_t requested = kind == RunKind::kAllocated ? block.requested_size : 0;
      if (!row.runs.empty() && row.runs.back().kind == kind) {
        row.runs.back().size += block.size;
        row.runs.back().requested += requested;
      } else {
        row.runs.push_back({kind, offset, block.size, requested});
      }
      offset += block.size;
    }
    rows.push_back(std::move(row));
  }
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.address < b.address; });
  return rows;
}

}  // namespace fragscope::metrics
