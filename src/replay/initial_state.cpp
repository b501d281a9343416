#include "replay/initial_state.h"

#include <algorithm>
#include <iterator>
#include <map>

#include <absl/container/flat_hash_map.h>

#include "alloc/size_rules.h"

namespace fragscope::replay {
namespace {

using snapshot::TraceAction;

struct SegmentAtStart {
  std::uint64_t size = 0;
  std::uint64_t stream = 0;
  bool small = false;
  bool expandable = false;
  std::pair<std::int64_t, std::int64_t> pool{0, 0};
};
using SegmentMap = std::map<std::uint64_t, SegmentAtStart>;  // address → segment / mapped run

/// The segment (or mapped run) containing `address`, or end().
SegmentMap::iterator containing(SegmentMap& segments, std::uint64_t address) {
  auto it = segments.upper_bound(address);
  if (it == segments.begin()) return segments.end();
  --it;
  return address < it->first + it->second.size ? it : segments.end();
}

/// Undoes the trace's segment events, newest first.
std::uint32_t undo_segment_events(SegmentMap& segments,
                                  std::span<const snapshot::TraceEvent> trace) {
  std::uint32_t anomalies = 0;
  for (auto e = trace.rbegin(); e != trace.rend(); ++e) {
    switch (e->action) {
      case TraceAction::kSegmentAlloc:
        if (segments.erase(e->addr) != 1) ++anomalies;
        break;
      case TraceAction::kSegmentFree:
        segments[e->addr] = {e->size, e->stream, e->size == alloc::kSmallBuffer, false};
        break;
      case TraceAction::kSegmentMap: {
        // The range was unmapped before: cut it out of its run.
        auto it = containing(segments, e->addr);
        if (it == segments.end() || e->addr + e->size > it->first + it->second.size) {
          ++anomalies;
          break;
        }
        const SegmentAtStart run = it->second;
        const std::uint64_t run_start = it->first;
        const std::uint64_t run_end = run_start + run.size;
        segments.erase(it);
        if (e->addr > run_start) {
          SegmentAtStart before = run;
          before.size = e->addr - run_start;
          segments[run_start] = before;
        }
        if (e->addr + e->size < run_end) {
          SegmentAtStart after = run;
          after.size = run_end - (e->addr + e->size);
          segments[e->addr + e->size] = after;
        }
        break;
      }
      case TraceAction::kSegmentUnmap: {
        // The range was mapped before: grow the adjacent runs of the same stream into one.
        SegmentAtStart run{e->size, e->stream, e->size % (20ull << 20) != 0, true};
        std::uint64_t start = e->addr;
        auto next = segments.find(e->addr + e->size);
        if (next != segments.end() && next->second.expandable &&
            next->second.stream == e->stream) {
          run.small = next->second.small;
          run.pool = next->second.pool;
          run.size += next->second.size;
          segments.erase(next);
        }
        auto prev = segments.lower_bound(e->addr);
        if (prev != segments.begin()) {
          --prev;
          if (prev->second.expandable && prev->second.stream == e->stream &&
              prev->first + prev->second.size == e->addr) {
            run.small = prev->second.small;
            run.pool = prev->second.pool;
            run.size += prev->second.size;
            start = prev->first;
            segments.erase(prev);
          }
        }
        segments[start] = run;
        break;
      }
      default:
        break;
    }
  }
  return anomalies;
}

struct LiveAtStart {
  std::uint64_t address = 0;
  std::uint64_t size = 0;  // 0 = to infer from `requested`
  std::uint64_t requested = 0;
  bool pending = false;
};

/// The size a block allocated before the trace must have had (see the header).
std::uint64_t infer_size(const LiveAtStart& b, std::uint64_t boundary, const SegmentAtStart& seg,
                         const alloc::AllocConfig& config) {
  const std::uint64_t rounded = alloc::round_size(b.requested, config);
  if (b.address + rounded >= boundary) return boundary - b.address;  // clamp to what fits
  const std::uint64_t gap = boundary - (b.address + rounded);
  if (seg.small || seg.expandable) return rounded;
  if (gap <= alloc::kSmallSize) return rounded + gap;
  if (rounded >= config.max_split_size && gap < config.max_non_split_rounding) {
    return rounded + gap;
  }
  return rounded;
}

}  // namespace

InitialState reconstruct_initial_state(
    const snapshot::Snapshot& snapshot, int device, std::span<const snapshot::TraceEvent> trace,
    const alloc::AllocConfig& config, const std::function<alloc::StreamId(std::uint64_t)>& stream_id,
    const std::function<alloc::MemPoolId(std::pair<std::int64_t, std::int64_t>)>& mem_pool_id) {
  InitialState state;
  SegmentMap segments;
  for (const snapshot::Segment& s : snapshot.segments) {
    if (s.device != device) continue;
    segments[s.address] = {s.total_size, s.stream, s.pool == snapshot::PoolKind::kSmall,
                           s.is_expandable, s.pool_id};
  }
  state.anomalies += undo_segment_events(segments, trace);

  // First block event per address: a free first means the block predates the trace.
  struct FirstSeen {
    bool is_free = false;
    bool completed_only = false;  // free_completed with no free_requested: pending at start
    std::uint64_t requested = 0;
  };
  absl::flat_hash_map<std::uint64_t, FirstSeen> first;
  for (const snapshot::TraceEvent& e : trace) {
    const bool is_alloc = e.action == TraceAction::kAlloc;
    const bool is_free =
        e.action == TraceAction::kFreeRequested || e.action == TraceAction::kFreeCompleted;
    if (!is_alloc && !is_free) continue;
    first.try_emplace(e.addr, FirstSeen{is_free, e.action == TraceAction::kFreeCompleted, e.size});
  }

  std::vector<LiveAtStart> live;
  for (const snapshot::Segment& s : snapshot.segments) {
    if (s.device != device) continue;
    for (const snapshot::Block& b : snapshot.blocks_of(s)) {
      if (b.state == snapshot::BlockState::kInactive || first.contains(b.address)) continue;
      live.push_back({b.address, b.size, b.requested_size,
                      b.state == snapshot::BlockState::kActivePendingFree});
    }
  }
  for (const auto& [address, seen] : first) {
    if (seen.is_free) live.push_back({address, 0, seen.requested, seen.completed_only});
  }
  std::sort(live.begin(), live.end(),
            [](const LiveAtStart& a, const LiveAtStart& b) { return a.address < b.address; });

  // Hand each block to its segment; infer the sizes of blocks allocated before the trace.
  std::map<std::uint64_t, std::vector<LiveAtStart>> by_segment;
  for (const LiveAtStart& b : live) {
    auto it = containing(segments, b.address);
    if (it == segments.end()) {
      ++state.anomalies;
      continue;
    }
    by_segment[it->first].push_back(b);
  }
  for (const auto& [address, seg] : segments) {
    alloc::InitialSegment out;
    out.address = address;
    out.size = seg.size;
    out.stream = stream_id(seg.stream);
    out.mem_pool = mem_pool_id(seg.pool);
    out.small_pool = seg.small;
    out.expandable = seg.expandable;
    auto blocks = by_segment.find(address);
    if (blocks != by_segment.end()) {
      auto& list = blocks->second;
      for (std::size_t i = 0; i < list.size(); ++i) {
        const std::uint64_t boundary = i + 1 < list.size() ? list[i + 1].address : address + seg.size;
        LiveAtStart& b = list[i];
        if (b.size == 0) b.size = infer_size(b, boundary, seg, config);
        b.size = std::min(b.size, boundary - b.address);
        out.live_blocks.push_back({b.address, b.size, b.requested, b.pending});
      }
    }
    state.reserved += seg.size;
    state.segments.push_back(std::move(out));
  }
  return state;
}

}  // namespace fragscope::replay
