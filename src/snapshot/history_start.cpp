#include "snapshot/history_start.h"

#include <algorithm>
#include <span>

#include <absl/container/flat_hash_set.h>

namespace fragscope::snapshot {

std::vector<const Block*> blocks_older_than_trace(const Snapshot& snapshot, int device) {
  absl::flat_hash_set<std::uint64_t> allocated_in_trace;
  for (const TraceEvent& e : snapshot.trace(device))
    if (e.action == TraceAction::kAlloc) allocated_in_trace.insert(e.addr);
  std::vector<const Block*> older;
  for (const Segment& segment : snapshot.segments) {
    if (segment.device != device) continue;
    for (const Block& block : snapshot.blocks_of(segment))
      if (block.state != BlockState::kInactive && !allocated_in_trace.contains(block.address)) older.push_back(&block);
  }
  return older;
}

HistoryStart history_start(const Snapshot& snapshot, int device) {
  const std::vector<const Block*> older = blocks_older_than_trace(snapshot, device);
  if (older.empty()) return HistoryStart::kAllocatorStart;
  if (std::any_of(older.begin(), older.end(), [](const Block* b) { return b->stack != 0; }))
    return HistoryStart::kRingWrapped;
  const std::span<const TraceEvent> trace = snapshot.trace(device);
  const bool trace_has_frames = std::any_of(
      trace.begin(), trace.end(), [](const TraceEvent& e) { return e.action == TraceAction::kAlloc && e.stack != 0; });
  const bool ring_long = !trace.empty() && trace.size() % kRoundRingEntries == 0;
  return trace_has_frames && !ring_long ? HistoryStart::kStartedLate : HistoryStart::kUnknown;
}

}  // namespace fragscope::snapshot
