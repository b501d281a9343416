#include "view/site_ranking.h"

#include <algorithm>
#include <map>

namespace fragscope::view {
namespace {

struct SiteLive {
  std::uint64_t bytes = 0;
  std::uint32_t count = 0;
};

std::map<std::string, SiteLive> live_by_site(const Moment& moment, std::size_t& allocations) {
  std::map<std::string, SiteLive> sites;
  const std::vector<AllocationId> alive = moment.index->live.alive_after(moment.event);
  allocations = alive.size();
  for (const AllocationId id : alive) {
    const Allocation& a = moment.index->allocations[id];
    SiteLive& site = sites[moment.index->sites.label(moment.index->sites.site_of(a))];
    site.bytes += a.size;
    ++site.count;
  }
  return sites;
}

MemoryTotalsAt totals_at(const Moment& moment) {
  MemoryTotalsAt totals;
  totals.active_bytes = moment.index->curves.active_after(moment.event);
  totals.reserved_bytes = moment.index->curves.reserved_after(moment.event);
  for (const SegmentState& segment : moment.index->segments.at(moment.event)) {
    ++totals.segments;
    totals.free_bytes += segment.free_bytes;
    totals.largest_free = std::max(totals.largest_free, segment.largest_free);
  }
  return totals;
}

}  // namespace

SiteRanking rank_sites(const TraceIndex& index, std::uint32_t first, std::uint32_t last, std::size_t limit) {
  SiteRanking ranking;
  ranking.first_event = first;
  ranking.last_event = last;
  const CurveExtremes extremes = index.curves.extremes(first, last);
  ranking.peak_event = extremes.active_max_event;
  ranking.peak_active_bytes = extremes.active_max;
  std::vector<SiteRow> rows(index.sites.size());
  for (const AllocationId id : index.live.alive_after(ranking.peak_event)) {
    const Allocation& a = index.allocations[id];
    SiteRow& row = rows[index.sites.site_of(a)];
    row.live_bytes += a.size;
    ++row.live_count;
  }
  const auto end = static_cast<AllocationId>(index.allocations.size());
  for (AllocationId id = index.allocations.first_allocated_from(first); id < end; ++id) {
    const Allocation& a = index.allocations[id];
    if (a.start > last) break;
    SiteRow& row = rows[index.sites.site_of(a)];
    row.allocated_bytes += a.size;
    ++row.allocations;
  }
  for (SiteId site = 0; site < rows.size(); ++site) {
    if (rows[site].live_count == 0 && rows[site].allocations == 0) continue;
    rows[site].location = index.sites.label(site);
    ranking.rows.push_back(std::move(rows[site]));
  }
  ranking.sites = ranking.rows.size();
  const auto larger = [](const SiteRow& a, const SiteRow& b) {
    if (a.live_bytes != b.live_bytes) return a.live_bytes > b.live_bytes;
    if (a.allocated_bytes != b.allocated_bytes) return a.allocated_bytes > b.allocated_bytes;
    return a.location < b.location;
  };
  const std::size_t keep = std::min(limit, ranking.rows.size());
  std::partial_sort(ranking.rows.begin(), ranking.rows.begin() + static_cast<std::ptrdiff_t>(keep), ranking.rows.end(),
                    larger);
  ranking.rows.resize(keep);
  return ranking;
}

MemoryDiff diff_moments(const Moment& before, const Moment& after, std::size_t limit) {
  MemoryDiff diff;
  diff.before = totals_at(before);
  diff.after = totals_at(after);
  const auto before_sites = live_by_site(before, diff.before.live_allocations);
  const auto after_sites = live_by_site(after, diff.after.live_allocations);
  std::map<std::string, SiteChange> changes;
  for (const auto& [location, live] : before_sites) changes[location] = {location, live.bytes, live.count, 0, 0};
  for (const auto& [location, live] : after_sites) {
    SiteChange& change = changes[location];
    change.location = location;
    change.after_bytes = live.bytes;
    change.after_count = live.count;
  }
  for (const auto& [location, change] : changes) {
    if (change.change() > 0) diff.grew.push_back(change);
    if (change.change() < 0) diff.shrank.push_back(change);
  }
  diff.changed_sites = diff.grew.size() + diff.shrank.size();
  const auto by_change = [](bool growth) {
    return [growth](const SiteChange& a, const SiteChange& b) {
      if (a.change() != b.change()) return growth ? a.change() > b.change() : a.change() < b.change();
      return a.location < b.location;
    };
  };
  std::sort(diff.grew.begin(), diff.grew.end(), by_change(true));
  std::sort(diff.shrank.begin(), diff.shrank.end(), by_change(false));
  if (diff.grew.size() > limit) diff.grew.resize(limit);
  if (diff.shrank.size() > limit) diff.shrank.resize(limit);
  return diff;
}

}  // namespace fragscope::view
