#include "snapshot/history_start.h"

#include <span>

#include <absl/container/flat_hash_set.h>

namespace fragscope::snapshot {

HistoryStart history_start(const Snapshot& snapshot, int device) {
  const std::span<const TraceEvent> trace = snapshot.trace(device);
  absl::flat_hash_set<std::uint64_t> allocated_in_trace;
  bool trace_has_frames = false;
  for (const TraceEvent& e : trace) {
    if (e.action != TraceAction::kAlloc) continue;
    allocated_in_trace.insert(e.addr);
    trace_has_frames = trace_has_frames || e.stack != 0;
  }
  bool older = false;
  for (const Segment& segment : snapshot.segments) {
    if (segment.device != device) continue;
    for (const Block& block : snapshot.blocks_of(segment)) {
      if (block.state == BlockState::kInactive || allocated_in_trace.contains(block.address)) continue;
      if (block.stack != 0) return HistoryStart::kRingWrapped;
      older = true;
    }
  }
  if (!older) return HistoryStart::kAllocatorStart;
  const bool ring_long = !trace.empty() && trace.size() % kRoundRingEntries == 0;
  return trace_has_frames && !ring_long ? HistoryStart::kStartedLate : HistoryStart::kUnknown;
}

}  // namespace fragscope::snapshot
