#include "view/site_ranking.h"

#include <gtest/gtest.h>

#include "fixture_snapshots.h"
#include "metrics/snapshot_analysis.h"

namespace fragscope::view {
namespace {

using testing::EndStateFixture;

class SiteRankingTest : public ::testing::TestWithParam<EndStateFixture> {};

TEST_P(SiteRankingTest, TheLastEventsSitesAreAnalyzesAndTheWholeTraceAddsUp) {
  const auto& snapshot = GetParam().read();
  const int device = snapshot::busiest_device(snapshot);
  if (snapshot.trace(device).empty()) GTEST_SKIP() << "no trace";
  const TraceIndex index(snapshot, device, GetParam().name);
  const std::uint32_t last = index.event_count() - 1;

  // After the last event: analyze's sites (it counts rounded block sizes, the view requested
  // bytes, so the order of the largest may differ by rounding only where sizes are close).
  const SiteRanking end = rank_sites(index, last, last, 1000);
  const auto analysis = metrics::analyze_snapshot(snapshot, device, 1000);
  std::uint64_t live = 0;
  for (const SiteRow& row : end.rows) live += row.live_bytes;
  EXPECT_EQ(live, index.curves.active_after(last));
  ASSERT_FALSE(analysis.top_sites.empty());
  std::set<std::string> ours, analyzes;
  for (const SiteRow& row : end.rows)
    if (row.live_count) ours.insert(row.location);
  for (const auto& site : analysis.top_sites) analyzes.insert(site.location);
  // analyze lists sites of active_allocated blocks; the view also holds pending frees.
  for (const auto& location : analyzes) EXPECT_TRUE(ours.contains(location)) << location;
  EXPECT_EQ(end.rows.front().location, analysis.top_sites.front().location);

  // The whole trace: every allocation made in it is counted once.
  const SiteRanking whole = rank_sites(index, 0, last, 1'000'000);
  std::uint64_t allocated = 0, expected = 0;
  std::uint32_t count = 0;
  for (const SiteRow& row : whole.rows) {
    allocated += row.allocated_bytes;
    count += row.allocations;
  }
  for (AllocationId id = index.allocations.before_trace_count(); id < index.allocations.size(); ++id)
    expected += index.allocations[id].size;
  EXPECT_EQ(allocated, expected);
  EXPECT_EQ(count, index.allocations.size() - index.allocations.before_trace_count());
  EXPECT_EQ(whole.peak_active_bytes, index.curves.extremes(0, last).active_max);
}

TEST_P(SiteRankingTest, ADiffsChangesAddUpToTheActiveBytesBetweenItsMoments) {
  const auto& snapshot = GetParam().read();
  const int device = snapshot::busiest_device(snapshot);
  if (snapshot.trace(device).empty()) GTEST_SKIP() << "no trace";
  const TraceIndex index(snapshot, device, GetParam().name);
  const std::uint32_t peak = index.curves.extremes(0, index.event_count() - 1).active_max_event;
  const Moment start{&index, 0}, at_peak{&index, peak};
  const MemoryDiff diff = diff_moments(start, at_peak, 1'000'000);
  std::int64_t net = 0;
  for (const SiteChange& c : diff.grew) net += c.change();
  for (const SiteChange& c : diff.shrank) net += c.change();
  EXPECT_EQ(net, static_cast<std::int64_t>(index.curves.active_after(peak)) -
                     static_cast<std::int64_t>(index.curves.active_after(0)));
  EXPECT_EQ(diff.after.active_bytes, index.curves.active_after(peak));
  EXPECT_EQ(diff.after.reserved_bytes, index.curves.reserved_after(peak));
  for (std::size_t i = 1; i < diff.grew.size(); ++i) EXPECT_GE(diff.grew[i - 1].change(), diff.grew[i].change());
  const MemoryDiff none = diff_moments(at_peak, at_peak, 10);
  EXPECT_EQ(none.changed_sites, 0u);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SiteRankingTest, ::testing::ValuesIn(testing::end_state_fixtures()),
                         testing::fixture_name);

}  // namespace
}  // namespace fragscope::view
