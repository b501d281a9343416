#include "view/timeline_query.h"

#include <algorithm>
#include <map>

#include <gtest/gtest.h>

#include "fixture_snapshots.h"

namespace fragscope::view {
namespace {

using testing::EndStateFixture;

class TimelineQueryTest : public ::testing::TestWithParam<EndStateFixture> {};

/// Every column: the bands alive at its peak event, stacked without gaps or overlaps from 0.
void expect_consistent(const TraceIndex& index, const Timeline& timeline, std::uint32_t max_bands) {
  std::map<std::uint32_t, std::vector<std::pair<std::uint64_t, std::uint64_t>>> stacks;  // column → (offset, size)
  for (const TimelineBand& band : timeline.bands) {
    const Allocation& a = index.allocations[band.allocation];
    ASSERT_FALSE(band.offsets.empty());
    EXPECT_EQ(band.offsets.front().first, band.first_column);
    std::size_t step = 0;
    for (std::uint32_t c = band.first_column; c <= band.last_column; ++c) {
      while (step + 1 < band.offsets.size() && band.offsets[step + 1].first <= c) ++step;
      EXPECT_TRUE(a.alive_after(timeline.columns[c].extremes.active_max_event)) << band.allocation << " at " << c;
      stacks[c].emplace_back(band.offsets[step].second, a.size);
    }
  }
  for (std::uint32_t c = 0; c < timeline.columns.size(); ++c) {
    auto& stack = stacks[c];
    std::sort(stack.begin(), stack.end());
    std::uint64_t top = 0;
    for (const auto& [offset, size] : stack) {
      EXPECT_EQ(offset, top) << "column " << c;
      top = offset + size;
    }
    EXPECT_EQ(top, timeline.columns[c].drawn_bytes) << "column " << c;
    EXPECT_LE(top, timeline.columns[c].extremes.active_max) << "column " << c;
  }
  // Nothing covering more of the picture (size × columns alive) than the least band was left out
  // (weighing every allocation alive in the viewport).
  const std::uint64_t events = std::uint64_t{timeline.last_event} - timeline.first_event + 1;
  if (timeline.bands.size() == max_bands && events < kExhaustiveViewportEvents) {
    std::vector<std::uint32_t> reps;
    for (const TimelineColumn& column : timeline.columns) reps.push_back(column.extremes.active_max_event);
    const auto area = [&](AllocationId id) {
      const Allocation& a = index.allocations[id];
      const auto begin = std::lower_bound(reps.begin(), reps.end(), a.start);
      const auto end = std::lower_bound(begin, reps.end(), a.end);
      return a.size * static_cast<std::uint64_t>(end - begin);
    };
    std::vector<AllocationId> drawn;
    std::uint64_t least = ~std::uint64_t{0};
    for (const TimelineBand& band : timeline.bands) {
      drawn.push_back(band.allocation);
      least = std::min(least, area(band.allocation));
    }
    std::sort(drawn.begin(), drawn.end());
    for (const AllocationId id : index.live.alive_during(reps.front(), reps.back())) {
      if (!std::binary_search(drawn.begin(), drawn.end(), id)) {
        EXPECT_LE(area(id), least) << "allocation " << id << " left out";
      }
    }
  }
}

TEST_P(TimelineQueryTest, ColumnsCoverTheRangeAndBandsStackAsAllocated) {
  const auto& snapshot = GetParam().read();
  const int device = snapshot::busiest_device(snapshot);
  if (snapshot.trace(device).empty()) GTEST_SKIP() << "no trace";
  const TraceIndex index(snapshot, device, GetParam().name);
  const std::uint32_t n = index.event_count();
  const std::uint32_t mid = n / 2;
  const std::uint32_t near = std::min(n - 1, mid + 500);
  for (const auto& [first, last, columns] : {std::tuple{0u, n - 1, 800u}, std::tuple{mid, near, 800u},
                                             std::tuple{mid, mid, 10u}, std::tuple{n / 3, 2 * n / 3, 97u}}) {
    const Timeline timeline = query_timeline(index, first, last, columns, 120);
    ASSERT_EQ(timeline.columns.size(), std::min<std::uint64_t>(columns, std::uint64_t{last} - first + 1));
    EXPECT_EQ(timeline.columns.front().first_event, first);
    EXPECT_EQ(timeline.columns.back().last_event, last);
    for (std::size_t c = 0; c < timeline.columns.size(); ++c) {
      const TimelineColumn& column = timeline.columns[c];
      if (c > 0) {
        EXPECT_EQ(column.first_event, timeline.columns[c - 1].last_event + 1);
      }
      const CurveExtremes expected = index.curves.extremes(column.first_event, column.last_event);
      EXPECT_EQ(column.extremes.active_max, expected.active_max);
      EXPECT_EQ(column.extremes.reserved_max, expected.reserved_max);
    }
    expect_consistent(index, timeline, 120);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TimelineQueryTest, ::testing::ValuesIn(testing::end_state_fixtures()),
                         testing::fixture_name);

}  // namespace
}  // namespace fragscope::view
