#pragma once
/// @file site_ranking.h
/// @brief Which code holds the memory: the allocation sites over a stretch of events, and
/// between two moments (of one snapshot or of two) what grew and what shrank.
/// Thread-safety: pure functions of the indexes.

#include <cstdint>
#include <string>
#include <vector>

#include "view/trace_index.h"

namespace fragscope::view {

struct SiteRow {
  std::string location;
  std::uint64_t live_bytes = 0;   ///< alive at the stretch's peak
  std::uint32_t live_count = 0;
  std::uint64_t allocated_bytes = 0;  ///< allocated within the stretch
  std::uint32_t allocations = 0;
};

struct SiteRanking {
  std::uint32_t first_event = 0;
  std::uint32_t last_event = 0;
  std::uint32_t peak_event = 0;  ///< where active bytes peak in the stretch
  std::uint64_t peak_active_bytes = 0;
  std::size_t sites = 0;         ///< sites with something alive at the peak or allocated
  std::vector<SiteRow> rows;     ///< by live bytes at the peak, then bytes allocated; at most the limit
};

/// @brief The sites of events [first, last]. REQUIRES: first <= last < index.event_count().
SiteRanking rank_sites(const TraceIndex& index, std::uint32_t first, std::uint32_t last, std::size_t limit);

/// @brief A moment to compare: one event of one snapshot.
struct Moment {
  const TraceIndex* index = nullptr;
  std::uint32_t event = 0;
};

struct SiteChange {
  std::string location;
  std::uint64_t before_bytes = 0;
  std::uint32_t before_count = 0;
  std::uint64_t after_bytes = 0;
  std::uint32_t after_count = 0;
  std::int64_t change() const {
    return static_cast<std::int64_t>(after_bytes) - static_cast<std::int64_t>(before_bytes);
  }
};

struct MemoryTotalsAt {
  std::uint64_t active_bytes = 0;
  std::uint64_t reserved_bytes = 0;
  std::size_t segments = 0;
  std::uint64_t free_bytes = 0;     ///< in the segments, between blocks
  std::uint64_t largest_free = 0;
  std::size_t live_allocations = 0;
};

struct MemoryDiff {
  MemoryTotalsAt before;
  MemoryTotalsAt after;
  std::size_t changed_sites = 0;
  std::vector<SiteChange> grew;    ///< largest growth first, at most the limit
  std::vector<SiteChange> shrank;  ///< largest shrink first, at most the limit
};

/// @brief What is alive at `after` against `before`, site by site (sites are matched by their
/// "file:line in name" text, so two snapshots of the same program compare).
MemoryDiff diff_moments(const Moment& before, const Moment& after, std::size_t limit);

}  // namespace fragscope::view
