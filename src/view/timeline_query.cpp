#include "view/timeline_query.h"

#include <algorithm>

namespace fragscope::view {
namespace {

constexpr std::size_t kMaxOffsetChanges = 200000;
constexpr std::size_t kSampledColumns = 16;
constexpr std::size_t kLargestPerBand = 4;

/// Columns [begin, end) of `reps` (increasing events) after whose event `a` is alive.
std::pair<std::uint32_t, std::uint32_t> columns_alive(const std::vector<std::uint32_t>& reps, const Allocation& a) {
  const auto begin = std::lower_bound(reps.begin(), reps.end(), a.start);
  const auto end = std::lower_bound(begin, reps.end(), a.end);
  return {static_cast<std::uint32_t>(begin - reps.begin()), static_cast<std::uint32_t>(end - reps.begin())};
}

/// The `limit` allocations that cover the most of the picture (size × columns alive), in id order.
/// Narrow viewports weigh every allocation alive in them; wide ones those alive at 16 columns
/// spread over them (the long-lived) and the largest by size (the short-lived peaks).
std::vector<AllocationId> most_visible(const TraceIndex& index, const std::vector<std::uint32_t>& reps,
                                       std::size_t limit) {
  if (limit == 0) return {};
  std::vector<AllocationId> candidates;
  if (std::uint64_t{reps.back()} - reps.front() < kExhaustiveViewportEvents) {
    candidates = index.live.alive_during(reps.front(), reps.back());
  } else {
    for (std::size_t k = 0; k < kSampledColumns; ++k) {
      const auto sampled = index.live.alive_after(reps[k * (reps.size() - 1) / (kSampledColumns - 1)]);
      candidates.insert(candidates.end(), sampled.begin(), sampled.end());
    }
    std::size_t largest = 0;
    for (const AllocationId id : index.allocations.by_size()) {
      if (largest >= kLargestPerBand * limit) break;
      const auto [begin, end] = columns_alive(reps, index.allocations[id]);
      if (begin < end) {
        candidates.push_back(id);
        ++largest;
      }
    }
    std::sort(candidates.begin(), candidates.end());
    candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  }
  std::vector<std::pair<std::uint64_t, AllocationId>> visible;  // (area, id)
  for (const AllocationId id : candidates) {
    const Allocation& a = index.allocations[id];
    const auto [begin, end] = columns_alive(reps, a);
    if (begin < end) visible.emplace_back(a.size * (end - begin), id);
  }
  if (visible.size() > limit) {
    const auto more_visible = [](const auto& x, const auto& y) {
      return x.first != y.first ? x.first > y.first : x.second < y.second;
    };
    const auto cut = visible.begin() + static_cast<std::ptrdiff_t>(limit);
    std::nth_element(visible.begin(), cut, visible.end(), more_visible);
    visible.resize(limit);
  }
  std::vector<AllocationId> chosen;
  for (const auto& [area, id] : visible) chosen.push_back(id);
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
  std::vector<AllocationId> chosen = most_visible(index, reps, max_bands);
  std::size_t changes = stack_bands(index, reps, chosen, timeline);
  // Too detailed to send: keep fewer, larger bands (removing bands moves the ones above).
  while (changes > kMaxOffsetChanges && !chosen.empty()) {
    std::vector<AllocationId> larger = chosen;
    std::sort(larger.begin(), larger.end(), [&](AllocationId a, AllocationId b) {
      const auto [a_begin, a_end] = columns_alive(reps, index.allocations[a]);
      const auto [b_begin, b_end] = columns_alive(reps, index.allocations[b]);
      return index.allocations[a].size * (a_end - a_begin) > index.allocations[b].size * (b_end - b_begin);
    });
    larger.resize(larger.size() * kMaxOffsetChanges / changes / 2 + larger.size() / 4);
    std::sort(larger.begin(), larger.end());
    chosen = std::move(larger);
    changes = stack_bands(index, reps, chosen, timeline);
  }
  return timeline;
}

}  // namespace fragscope::view
