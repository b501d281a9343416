#pragma once
/// @file view_json.h
/// @brief The view's answers as JSON, one function per endpoint; docs/view.md lists every key.
/// Byte counts are integers, events are indexes into the device's trace, allocations are ids of
/// the snapshot's allocation table (allocation_table.h).

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "view/doctor_run.h"
#include "view/segment_history.h"
#include "view/site_ranking.h"
#include "view/timeline_query.h"
#include "view/viewed_snapshot.h"
#include "view/whatif_overlay.h"

namespace fragscope::view {

/// @brief The schema of every view answer (report/json_header.h's rule).
inline constexpr int kViewJsonSchema = 1;

/// @brief /api/snapshots: what each snapshot holds.
nlohmann::json snapshots_json(const std::vector<const ViewedSnapshot*>& snapshots);
/// @brief /api/timeline.
nlohmann::json timeline_json(const TraceIndex& index, const Timeline& timeline);
/// @brief /api/event: one trace event, its allocation and stack.
nlohmann::json event_json(const TraceIndex& index, std::uint32_t event);
/// @brief /api/allocation: one allocation's life, site and stack.
nlohmann::json allocation_json(const TraceIndex& index, AllocationId allocation);
/// @brief /api/segments: the segment map after an event.
nlohmann::json segments_json(const TraceIndex& index, std::uint32_t event, const std::vector<SegmentState>& segments);
/// @brief /api/sites.
nlohmann::json sites_json(const SiteRanking& ranking);
/// @brief /api/diff.
nlohmann::json diff_json(const MemoryDiff& diff);
/// @brief /api/whatif: the curve's state and, once done, its maxima per column of `timeline`.
nlohmann::json whatif_json(const WhatIfCurve& curve, const Timeline& timeline);
/// @brief /api/doctor: the doctor's state and, once done, its verdict (report::doctor_json).
nlohmann::json doctor_json(const TraceIndex& index, const DoctorOutcome& outcome);

}  // namespace fragscope::view
