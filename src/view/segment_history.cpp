#include "view/segment_history.h"

#include <algorithm>
#include <iterator>
#include <map>

namespace fragscope::view {
namespace {

using snapshot::TraceAction;
using Segments = std::map<std::uint64_t, SegmentState>;

constexpr std::uint64_t kMinBlockSize = 512;

/// Pages [address, address + size) mapped: they join the mapped runs they touch.
void map_pages(Segments& segments, std::uint64_t address, std::uint64_t size, std::uint64_t stream) {
  SegmentState joined{address, size, stream, true, {}, 0, 0};
  auto next = segments.lower_bound(address);
  if (next != segments.end() && next->second.expandable && next->first == address + size) {
    joined.size += next->second.size;
    next = segments.erase(next);
  }
  if (next != segments.begin()) {
    auto before = std::prev(next);
    if (before->second.expandable && before->first + before->second.size == address) {
      before->second.size += joined.size;
      return;
    }
  }
  segments[address] = joined;
}

/// Pages [address, address + size) unmapped: the segment holding them shrinks or splits.
void unmap_pages(Segments& segments, std::uint64_t address, std::uint64_t size) {
  auto it = segments.upper_bound(address);
  if (it == segments.begin()) return;
  --it;
  SegmentState& holder = it->second;
  const std::uint64_t end = address + size;
  const std::uint64_t holder_end = holder.address + holder.size;
  if (address >= holder_end) return;
  if (address == holder.address) {
    SegmentState rest = holder;
    segments.erase(it);
    if (end < holder_end) {
      rest.address = end;
      rest.size = holder_end - end;
      segments[end] = rest;
    }
    return;
  }
  holder.size = address - holder.address;
  if (end < holder_end) segments[end] = {end, holder_end - end, holder.stream, true, {}, 0, 0};
}

void apply(Segments& segments, TraceAction action, std::uint64_t address, std::uint64_t size, std::uint64_t stream,
           bool undo) {
  const bool adds = (action == TraceAction::kSegmentAlloc || action == TraceAction::kSegmentMap) != undo;
  const bool pages = action == TraceAction::kSegmentMap || action == TraceAction::kSegmentUnmap;
  if (pages) {
    if (adds) {
      map_pages(segments, address, size, stream);
    } else {
      unmap_pages(segments, address, size);
    }
  } else if (adds) {
    segments[address] = {address, size, stream, false, {}, 0, 0};
  } else {
    segments.erase(address);
  }
}

bool is_segment_action(TraceAction action) {
  return action == TraceAction::kSegmentAlloc || action == TraceAction::kSegmentFree ||
         action == TraceAction::kSegmentMap || action == TraceAction::kSegmentUnmap;
}

}  // namespace

SegmentHistory::SegmentHistory(const snapshot::Snapshot& snapshot, int device, const AllocationTable& allocations,
                               const LiveSet& live)
    : allocations_(allocations), live_(live) {
  Segments segments;
  for (const snapshot::Segment& segment : snapshot.segments) {
    if (segment.device != device) continue;
    segments[segment.address] = {segment.address, segment.total_size, segment.stream, segment.is_expandable, {}, 0, 0};
    for (const snapshot::Block& block : snapshot.blocks_of(segment)) {
      if (block.state != snapshot::BlockState::kInactive) end_block_sizes_[block.address] = block.size;
    }
  }
  const auto trace = snapshot.trace(device);
  for (std::uint32_t i = 0; i < trace.size(); ++i) {
    const snapshot::TraceEvent& e = trace[i];
    if (is_segment_action(e.action)) events_.push_back({i, e.action, e.addr, e.size, e.stream});
  }
  for (auto it = events_.rbegin(); it != events_.rend(); ++it) {
    apply(segments, it->action, it->address, it->size, it->stream, true);
  }
  for (auto& [address, segment] : segments) initial_.push_back(segment);
}

std::vector<SegmentState> SegmentHistory::at(std::uint32_t event) const {
  Segments segments;
  for (const SegmentState& segment : initial_) segments[segment.address] = segment;
  for (const SegmentEvent& e : events_) {
    if (e.event > event) break;
    apply(segments, e.action, e.address, e.size, e.stream, false);
  }
  const std::uint32_t events = allocations_.event_count();
  for (const AllocationId id : live_.alive_after(event)) {
    const Allocation& a = allocations_[id];
    auto it = segments.upper_bound(a.address);
    if (it == segments.begin()) continue;
    --it;
    SegmentState& segment = it->second;
    if (a.address >= segment.address + segment.size) continue;  // in no segment: a ring-buffer edge
    std::uint64_t size = std::max(kMinBlockSize, (a.size + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize);
    if (a.end == events) {
      if (const auto found = end_block_sizes_.find(a.address); found != end_block_sizes_.end()) size = found->second;
    }
    const std::uint64_t offset = a.address - segment.address;
    size = std::min(size, segment.size - offset);
    const bool pending = a.free_requested != kNoEvent && a.free_requested <= event;
    segment.blocks.push_back({id, offset, size, a.size, pending});
  }
  std::vector<SegmentState> result;
  result.reserve(segments.size());
  for (auto& [address, segment] : segments) {
    std::sort(segment.blocks.begin(), segment.blocks.end(),
              [](const SegmentBlock& x, const SegmentBlock& y) { return x.offset < y.offset; });
    std::uint64_t cursor = 0;
    for (const SegmentBlock& block : segment.blocks) {
      if (block.offset > cursor) {
        segment.free_bytes += block.offset - cursor;
        segment.largest_free = std::max(segment.largest_free, block.offset - cursor);
      }
      cursor = std::max(cursor, block.offset + block.size);
    }
    if (segment.size > cursor) {
      segment.free_bytes += segment.size - cursor;
      segment.largest_free = std::max(segment.largest_free, segment.size - cursor);
    }
    result.push_back(std::move(segment));
  }
  return result;
}

}  // namespace fragscope::view
