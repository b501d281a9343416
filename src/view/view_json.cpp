#include "view/view_json.h"

#include <algorithm>

#include "report/doctor_report.h"
#include "report/json_header.h"

namespace fragscope::view {
namespace {

using nlohmann::json;

json with_header() {
  json doc = json::object();
  report::add_json_header(doc, kViewJsonSchema);
  return doc;
}

json event_or_null(std::uint32_t event) { return event == kNoEvent ? json(nullptr) : json(event); }

json frames_json(const snapshot::Snapshot& snapshot, snapshot::StackId stack) {
  json frames = json::array();
  for (const snapshot::FrameId id : snapshot.stacks.stack(stack)) {
    const snapshot::Frame& frame = snapshot.stacks.frame(id);
    frames.push_back({{"file", snapshot.strings.view(frame.filename)},
                      {"line", frame.line == snapshot::Frame::kUnknownLine ? json(nullptr) : json(frame.line)},
                      {"name", snapshot.strings.view(frame.name)}});
  }
  return frames;
}

}  // namespace

json snapshots_json(const std::vector<const ViewedSnapshot*>& snapshots) {
  json doc = with_header();
  doc["snapshots"] = json::array();
  for (std::size_t id = 0; id < snapshots.size(); ++id) {
    const TraceIndex& index = snapshots[id]->index();
    const auto trace = index.trace();
    const std::uint32_t last = index.event_count() - 1;
    const CurveExtremes whole = index.curves.extremes(0, last);
    doc["snapshots"].push_back({
        {"id", id},
        {"name", snapshots[id]->name()},
        {"device", index.device},
        {"events", index.event_count()},
        {"allocations", index.allocations.size()},
        {"allocations_before_trace", index.allocations.before_trace_count()},
        {"sites", index.sites.size()},
        {"first_time_us", trace.front().time_us},
        {"last_time_us", trace.back().time_us},
        {"initial_reserved_bytes", index.curves.initial_reserved()},
        {"initial_active_bytes", index.allocations.initial_active_bytes()},
        {"peak_active_bytes", whole.active_max},
        {"peak_active_event", whole.active_max_event},
        {"peak_reserved_bytes", whole.reserved_max},
        {"final_reserved_bytes", index.curves.reserved_after(last)},
        {"final_active_bytes", index.curves.active_after(last)},
        {"oom_events", index.ooms},
        {"recorded_conf", index.snapshot.allocator_settings.alloc_conf},
    });
  }
  return doc;
}

json timeline_json(const TraceIndex& index, const Timeline& timeline) {
  json doc = with_header();
  doc["from"] = timeline.first_event;
  doc["to"] = timeline.last_event;
  json first = json::array(), last = json::array(), peak = json::array(), active_max = json::array(),
       active_min = json::array(), reserved_max = json::array(), reserved_min = json::array(), drawn = json::array();
  for (const TimelineColumn& c : timeline.columns) {
    first.push_back(c.first_event);
    last.push_back(c.last_event);
    peak.push_back(c.extremes.active_max_event);
    active_max.push_back(c.extremes.active_max);
    active_min.push_back(c.extremes.active_min);
    reserved_max.push_back(c.extremes.reserved_max);
    reserved_min.push_back(c.extremes.reserved_min);
    drawn.push_back(c.drawn_bytes);
  }
  doc["columns"] = {{"first_event", first}, {"last_event", last},         {"peak_event", peak},
                    {"active_max", active_max}, {"active_min", active_min}, {"reserved_max", reserved_max},
                    {"reserved_min", reserved_min}, {"drawn_bytes", drawn}};
  json bands = json::array();
  for (const TimelineBand& band : timeline.bands) {
    json offsets = json::array();
    for (const auto& [column, offset] : band.offsets) offsets.push_back({column, offset});
    bands.push_back({{"allocation", band.allocation},
                     {"size", band.size},
                     {"first_column", band.first_column},
                     {"last_column", band.last_column},
                     {"offsets", offsets}});
  }
  doc["bands"] = bands;
  json ooms = json::array();
  for (const std::uint32_t oom : index.ooms)
    if (oom >= timeline.first_event && oom <= timeline.last_event) ooms.push_back(oom);
  doc["oom_events"] = ooms;
  return doc;
}

json event_json(const TraceIndex& index, std::uint32_t event) {
  const snapshot::TraceEvent& e = index.trace()[event];
  json doc = with_header();
  doc["event"] = event;
  doc["action"] = index.snapshot.action_name(e);
  if (e.action == snapshot::TraceAction::kOom) {
    doc["device_free_bytes"] = e.addr;
  } else {
    doc["address"] = e.addr;
  }
  doc["size"] = e.size;
  doc["stream"] = e.stream;
  doc["time_us"] = e.time_us;
  doc["active_bytes"] = index.curves.active_after(event);
  doc["reserved_bytes"] = index.curves.reserved_after(event);
  const AllocationId allocation = index.allocations.at_event(event);
  doc["allocation"] = allocation == kNoAllocation ? json(nullptr) : json(allocation);
  doc["user_metadata"] = e.user_metadata ? json(index.snapshot.strings.view(e.user_metadata)) : json(nullptr);
  doc["frames"] = frames_json(index.snapshot, e.stack);
  return doc;
}

json allocation_json(const TraceIndex& index, AllocationId allocation) {
  const Allocation& a = index.allocations[allocation];
  const bool before = index.allocations.before_trace(allocation);
  json doc = with_header();
  doc["allocation"] = allocation;
  doc["address"] = a.address;
  doc["size"] = a.size;
  doc["alloc_event"] = before ? json(nullptr) : json(a.start);
  doc["free_requested_event"] = event_or_null(a.free_requested);
  doc["free_completed_event"] = a.end == index.event_count() ? json(nullptr) : json(a.end);
  doc["site"] = index.sites.label(index.sites.site_of(a));
  doc["stack_of"] = !before ? "alloc" : a.end < index.event_count() || a.free_requested != kNoEvent ? "free"
                                                                                                    : "block";
  doc["frames"] = frames_json(index.snapshot, a.stack);
  return doc;
}

json segments_json(const TraceIndex& index, std::uint32_t event, const std::vector<SegmentState>& segments) {
  json doc = with_header();
  doc["event"] = event;
  doc["active_bytes"] = index.curves.active_after(event);
  doc["reserved_bytes"] = index.curves.reserved_after(event);
  json rows = json::array();
  for (const SegmentState& s : segments) {
    json blocks = json::array();
    for (const SegmentBlock& b : s.blocks)
      blocks.push_back({b.allocation, b.offset, b.size, b.requested, b.pending_free ? 1 : 0});
    rows.push_back({{"address", s.address},
                    {"size", s.size},
                    {"stream", s.stream},
                    {"expandable", s.expandable},
                    {"free_bytes", s.free_bytes},
                    {"largest_free", s.largest_free},
                    {"blocks", blocks}});
  }
  doc["segments"] = rows;
  return doc;
}

json sites_json(const SiteRanking& ranking) {
  json doc = with_header();
  doc["from"] = ranking.first_event;
  doc["to"] = ranking.last_event;
  doc["peak_event"] = ranking.peak_event;
  doc["peak_active_bytes"] = ranking.peak_active_bytes;
  doc["sites"] = ranking.sites;
  json rows = json::array();
  for (const SiteRow& row : ranking.rows) {
    rows.push_back({{"location", row.location},
                    {"live_bytes", row.live_bytes},
                    {"live_count", row.live_count},
                    {"allocated_bytes", row.allocated_bytes},
                    {"allocations", row.allocations}});
  }
  doc["rows"] = rows;
  return doc;
}

json diff_json(const MemoryDiff& diff) {
  const auto totals = [](const MemoryTotalsAt& t) {
    return json{{"active_bytes", t.active_bytes}, {"reserved_bytes", t.reserved_bytes},
                {"segments", t.segments},         {"free_bytes", t.free_bytes},
                {"largest_free", t.largest_free}, {"live_allocations", t.live_allocations}};
  };
  const auto changes = [](const std::vector<SiteChange>& list) {
    json rows = json::array();
    for (const SiteChange& c : list) {
      rows.push_back({{"location", c.location},
                      {"before_bytes", c.before_bytes},
                      {"before_count", c.before_count},
                      {"after_bytes", c.after_bytes},
                      {"after_count", c.after_count},
                      {"change_bytes", c.change()}});
    }
    return rows;
  };
  json doc = with_header();
  doc["before"] = totals(diff.before);
  doc["after"] = totals(diff.after);
  doc["changed_sites"] = diff.changed_sites;
  doc["grew"] = changes(diff.grew);
  doc["shrank"] = changes(diff.shrank);
  return doc;
}

json whatif_json(const WhatIfCurve& curve, const Timeline& timeline) {
  json doc = with_header();
  doc["config"] = curve.name;
  switch (curve.state) {
    case WhatIfCurve::State::kPending: doc["state"] = "pending"; return doc;
    case WhatIfCurve::State::kFailed:
      doc["state"] = "failed";
      doc["error"] = curve.error;
      return doc;
    case WhatIfCurve::State::kDone: doc["state"] = "done"; break;
  }
  doc["capacity_bytes"] = curve.capacity_bytes ? json(*curve.capacity_bytes) : json(nullptr);
  doc["oom_event"] = curve.oom_event ? json(*curve.oom_event) : json(nullptr);
  doc["completed"] = curve.completed;
  doc["peak_reserved_bytes"] = curve.peak_reserved_bytes;
  // Per column: the maxima of the points overlapping it, else of the point before it (the
  // events between two points change nothing the replay counts); null past the replay's end.
  json reserved = json::array(), allocated = json::array();
  const auto& points = curve.points;
  auto point = points.begin();
  for (const TimelineColumn& column : timeline.columns) {
    point = std::lower_bound(point, points.end(), column.first_event,
                             [](const replay::TimelinePoint& p, std::uint32_t e) { return p.last_trace_index < e; });
    if (point == points.end()) {
      reserved.push_back(nullptr);
      allocated.push_back(nullptr);
      continue;
    }
    auto p = point;
    if (p->first_trace_index > column.last_event) {
      if (p == points.begin()) {
        reserved.push_back(nullptr);
        allocated.push_back(nullptr);
        continue;
      }
      --p;
    }
    std::uint64_t column_reserved = p->reserved, column_allocated = p->allocated;
    for (; p != points.end() && p->first_trace_index <= column.last_event; ++p) {
      column_reserved = std::max(column_reserved, p->reserved);
      column_allocated = std::max(column_allocated, p->allocated);
    }
    reserved.push_back(column_reserved);
    allocated.push_back(column_allocated);
  }
  doc["columns"] = {{"reserved_max", reserved}, {"allocated_max", allocated}};
  return doc;
}

json doctor_json(const TraceIndex& index, const DoctorOutcome& outcome) {
  json doc = with_header();
  doc["oom_event"] = index.last_oom ? json(*index.last_oom) : json(nullptr);
  if (!outcome.done) {
    doc["state"] = "running";
  } else if (!outcome.diagnosis) {
    doc["state"] = "failed";
    doc["error"] = outcome.error;
  } else {
    doc["state"] = "done";
    doc["diagnosis"] = report::doctor_json(*outcome.diagnosis);
  }
  return doc;
}

}  // namespace fragscope::view
