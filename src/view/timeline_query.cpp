#include "view/timeline_query.h"

#include <algorithm>

namespace fragscope::view {
namespace {

// Below this many events, candidates come from the live sets; above, from the size order.
constexpr std::uint64_t kEnumerateEvents = std::uint64_t{1} << 21;
constexpr std::size_t kMaxOffsetChanges = 200000;

/// Columns [begin, end) of `reps` (increasing events) after whose event `a` is alive.
std::pair<std::uint32_t, std::uint32_t> columns_alive(const std::vector<std::uint32_t>& reps, const Allocation& a) {
  const auto begin = std::lower_bound(reps.begin(), reps.end(), a.start);
  const auto end = std::lower_bound(begin, reps.end(), a.end);
  return {static_cast<std::uint32_t>(begin - reps.begin()), static_cast<std::uint32_t>(end - reps.begin())};
}

/// The `limit` largest allocations alive after some rep, in id order.
std::vector<AllocationId> largest_alive(const TraceIndex& index, const std::vector<std::uint32_t>& reps,
                                        std::size_t limit) {
  const auto alive_somewhere = [&](AllocationId id) {
    const auto [begin, end] = columns_alive(reps, index.allocations[id]);
    return begin < end;
  };
  std::vector<AllocationId> chosen;
  if (std::uint64_t{reps.back()} - reps.front() < kEnumerateEvents) {
    for (const AllocationId id : index.live.alive_during(reps.front(), reps.back())) {
      if (alive_somewhere(id)) chosen.push_back(id);
    }
    const auto by_size = [&](AllocationId a, AllocationId b) {
      const auto sa = index.allocations[a].size, sb = index.allocations[b].size;
      return sa != sb ? sa > sb : a < b;
    };
    if (chosen.size() > limit) {
      std::nth_element(chosen.begin(), chosen.begin() + static_cast<std::ptrdiff_t>(limit), chosen.end(), by_size);
      chosen.resize(limit);
    }
  } else {
    for (const AllocationId id : index.allocations.by_size()) {
      if (chosen.size() >= limit) break;
      if (alive_somewhere(id)) chosen.push_back(id);
    }
  }
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

/// Stacks `chosen` (id order) over the columns; returns the offset changes in all.
std::size_t stack_bands(const TraceIndex& index, const std::vector<std::uint32_t>& reps,
                        const std::vector<AllocationId>& chosen, Timeline& timeline) {
  timeline.bands.clear();
  for (TimelineColumn& column : timeline.columns) column.drawn_bytes = 0;
  std::size_t changes = 0;
  for (const AllocationId id : chosen) {
    const Allocation& a = index.allocations[id];
    const auto [begin, end] = columns_alive(reps, a);
    TimelineBand band{id, a.size, begin, end - 1, {}};
    for (std::uint32_t c = begin; c < end; ++c) {
      const std::uint64_t offset = timeline.columns[c].drawn_bytes;
      if (band.offsets.empty() || band.offsets.back().second != offset) band.offsets.emplace_back(c, offset);
      timeline.columns[c].drawn_bytes += a.size;
    }
    changes += band.offsets.size();
    timeline.bands.push_back(std::move(band));
  }
  return changes;
}

}  // namespace

Timeline query_timeline(const TraceIndex& index, std::uint32_t first, std::uint32_t last, std::uint32_t columns,
                        std::uint32_t max_bands) {
  Timeline timeline;
  timeline.first_event = first;
  timeline.last_event = last;
  const std::uint64_t events = std::uint64_t{last} - first + 1;
  const std::uint64_t count = std::min<std::uint64_t>(columns, events);
  std::vector<std::uint32_t> reps;
  for (std::uint64_t c = 0; c < count; ++c) {
    const auto from = static_cast<std::uint32_t>(first + c * events / count);
    const auto to = static_cast<std::uint32_t>(first + (c + 1) * events / count - 1);
    const CurveExtremes extremes = index.curves.extremes(from, to);
    timeline.columns.push_back({from, to, extremes, 0});
    reps.push_back(extremes.active_max_event);
  }
  std::vector<AllocationId> chosen = largest_alive(index, reps, max_bands);
  std::size_t changes = stack_bands(index, reps, chosen, timeline);
  // Too detailed to send: keep fewer, larger bands (removing bands moves the ones above).
  while (changes > kMaxOffsetChanges && !chosen.empty()) {
    std::vector<AllocationId> larger = chosen;
    std::sort(larger.begin(), larger.end(), [&](AllocationId a, AllocationId b) {
      return index.allocations[a].size > index.allocations[b].size;
    });
    larger.resize(larger.size() * kMaxOffsetChanges / changes / 2 + larger.size() / 4);
    std::sort(larger.begin(), larger.end());
    chosen = std::move(larger);
    changes = stack_bands(index, reps, chosen, timeline);
  }
  return timeline;
}

}  // namespace fragscope::view
