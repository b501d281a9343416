#include "report/doctor_page_data.h"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "report/segment_lot.h"

namespace fragscope::report {
namespace {

using diagnose::Diagnosis;
using diagnose::TimelineSample;
using nlohmann::json;

template <class T>
json optional_json(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

/// Seconds to the microsecond: shorter text, no precision a chart can show.
double microseconds(double seconds) { return std::round(seconds * 1e6) / 1e6; }

/// Calls `visit(first, last)` (last exclusive) for at most `points` equal stretches of [0, n).
template <class Visit>
void for_each_stretch(std::size_t n, std::size_t points, Visit visit) {
  const std::size_t stretches = std::min(n, points);
  for (std::size_t b = 0; b < stretches; ++b) visit(b * n / stretches, (b + 1) * n / stretches);
}

/// The curve's x for trace event `event`: its stretch's time (or the event itself without time).
class CurveAxis {
 public:
  explicit CurveAxis(const std::vector<TimelineSample>& timeline)
      : timeline_(timeline),
        timed_(!timeline.empty() &&
               std::all_of(timeline.begin(), timeline.end(), [](const auto& p) { return p.seconds.has_value(); })) {}

  bool timed() const { return timed_; }

  double x_of(std::size_t event) const {
    if (!timed_) return static_cast<double>(event);
    const auto it = std::lower_bound(timeline_.begin(), timeline_.end(), event,
                                     [](const TimelineSample& p, std::size_t e) { return p.trace_index < e; });
    if (it == timeline_.end()) return *timeline_.back().seconds;
    if (it == timeline_.begin()) return *it->seconds;
    // Between two stretch ends, in proportion to the events.
    const auto& before = *(it - 1);
    const double share =
        static_cast<double>(event - before.trace_index) / static_cast<double>(it->trace_index - before.trace_index);
    return microseconds(*before.seconds + share * (*it->seconds - *before.seconds));
  }

 private:
  const std::vector<TimelineSample>& timeline_;
  bool timed_;
};

json curve_json(const Diagnosis& d) {
  if (d.timeline.empty()) return nullptr;
  const CurveAxis axis(d.timeline);
  json x = json::array(), event = json::array(), reserved = json::array(), reserved_min = json::array(),
       allocated = json::array(), allocated_min = json::array();
  for (const TimelineSample& p : d.timeline) {
    x.push_back(axis.timed() ? microseconds(*p.seconds) : static_cast<double>(p.trace_index));
    event.push_back(p.trace_index);
    reserved.push_back(p.reserved_bytes);
    reserved_min.push_back(p.reserved_min_bytes);
    allocated.push_back(p.allocated_bytes);
    allocated_min.push_back(p.allocated_min_bytes);
  }
  json steps = json::array();
  for (const auto& m : d.step_marks)
    steps.push_back({{"step", m.step},
                     {"event", m.trace_index},
                     {"x", axis.x_of(m.trace_index)},
                     {"phase", m.phase},
                     {"optimizer_step", m.optimizer_step}});
  json curve = {{"x_unit", axis.timed() ? "s" : "event"},
                {"x", x},
                {"event", event},
                {"reserved", reserved},
                {"reserved_min", reserved_min},
                {"allocated", allocated},
                {"allocated_min", allocated_min},
                {"steps", steps},
                {"capacity_bytes", optional_json(d.capacity_bytes)},
                {"oom", nullptr},
                {"failing", nullptr}};
  if (d.timeline_oom_index) {
    curve["oom"] = {{"event", *d.timeline_oom_index}, {"x", axis.x_of(*d.timeline_oom_index)}};
    // The failing step: from the unit's start the trace shows, else from the last step's end.
    std::optional<std::size_t> start = d.failing_unit_start;
    if (!start && !d.step_marks.empty() && d.step_marks.back().trace_index < *d.timeline_oom_index)
      start = d.step_marks.back().trace_index;
    if (start)
      curve["failing"] = {{"event", *start},
                          {"x", axis.x_of(*start)},
                          {"phase", d.phase},
                          {"step", d.step_marks.empty() ? json(nullptr) : json(d.step_marks.back().step + 1)}};
  }
  return curve;
}

/// The runs as flat triples: kind (0 allocated, 1 pending free, 2 free), offset, size.
json runs_json(const metrics::SegmentRow& row) {
  json runs = json::array();
  auto add = [&](metrics::RunKind kind, std::uint64_t offset, std::uint64_t size) {
    const auto n = runs.size();
    if (n >= 3 && runs[n - 3] == static_cast<int>(kind)) {  // the same kind as the last: one run
      runs[n - 1] = runs[n - 1].get<std::uint64_t>() + size;
      return;
    }
    runs.push_back(static_cast<int>(kind));
    runs.push_back(offset);
    runs.push_back(size);
  };
  if (row.runs.size() <= kPageRunsPerSegment || row.total_size == 0) {
    for (const auto& run : row.runs) add(run.kind, run.offset, run.size);
    return runs;
  }
  // Too many to draw: equal slices, each drawn as its allocated, pending and free bytes in that
  // order, so every kind keeps its exact bytes and its place to within a slice.
  std::size_t next = 0;
  for (std::size_t slice = 0; slice < kPageRunsPerSegment; ++slice) {
    const std::uint64_t begin = row.total_size * slice / kPageRunsPerSegment;
    const std::uint64_t end = row.total_size * (slice + 1) / kPageRunsPerSegment;
    std::array<std::uint64_t, 3> bytes{};
    while (next < row.runs.size() && row.runs[next].offset < end) {
      const auto& run = row.runs[next];
      const std::uint64_t lo = std::max(begin, run.offset), hi = std::min(end, run.offset + run.size);
      if (hi > lo) bytes[static_cast<std::size_t>(run.kind)] += hi - lo;
      if (run.offset + run.size > end) break;  // it goes on into the next slice
      ++next;
    }
    std::uint64_t at = begin;
    for (const auto kind : {metrics::RunKind::kAllocated, metrics::RunKind::kPendingFree, metrics::RunKind::kFree}) {
      const std::uint64_t size = bytes[static_cast<std::size_t>(kind)];
      if (size > 0) add(kind, at, size);
      at += size;
    }
  }
  return runs;
}

json segments_json(const Diagnosis& d) {
  if (d.segment_map.empty()) return nullptr;
  const SegmentLot lot = arrange_segment_lot(d.segment_map);
  json slots = json::array();
  for (const LotSlot& s : lot.slots) {
    json slot = {{"count", s.segments},
                 {"size", s.total_bytes},
                 {"free", s.free_bytes},
                 {"pending", s.pending_free_bytes},
                 {"largest_free", s.largest_free_bytes},
                 {"private", s.private_pool}};
    if (s.row) {
      slot["address"] = fmt::format("0x{:x}", s.row->address);
      slot["runs"] = runs_json(*s.row);
    } else {
      slot["smallest"] = s.smallest_segment_bytes;
      slot["largest"] = s.largest_segment_bytes;
    }
    slots.push_back(std::move(slot));
  }
  json holes = json::array();
  for (const HoleBucket& h : lot.holes)
    holes.push_back({{"low", h.low}, {"high", h.high}, {"holes", h.holes}, {"bytes", h.bytes}});
  return {{"at_oom", d.segment_map_at_oom},
          {"segments", lot.totals.segments},
          {"reserved_bytes", lot.totals.reserved_bytes},
          {"free_bytes", lot.totals.free_bytes},
          {"pending_free_bytes", lot.totals.pending_free_bytes},
          {"largest_free_bytes", lot.totals.largest_free_bytes},
          {"request_bytes", d.oom_context ? json(d.oom_context->request_bytes) : json(nullptr)},
          {"slots", slots},
          {"holes", holes}};
}

/// The records' columns, each stretch of records reduced to its last step, its longest wait
/// and compute, and its last figures.
json steps_json(const std::vector<diagnose::StepTime>& times) {
  json step = json::array(), wait = json::array(), compute = json::array(), t = json::array(), reserved = json::array(),
       allocated = json::array();
  for_each_stretch(times.size(), kPageSeriesPoints, [&](std::size_t first, std::size_t last) {
    double longest_wait = 0, longest_compute = 0;
    for (std::size_t i = first; i < last; ++i) {
      longest_wait = std::max(longest_wait, times[i].data_wait_ms);
      longest_compute = std::max(longest_compute, times[i].compute_ms);
    }
    const auto& end = times[last - 1];
    step.push_back(end.step);
    wait.push_back(std::round(longest_wait * 1000) / 1000);
    compute.push_back(std::round(longest_compute * 1000) / 1000);
    t.push_back(end.t ? json(microseconds(*end.t)) : json(nullptr));
    reserved.push_back(optional_json(end.reserved_bytes));
    allocated.push_back(optional_json(end.allocated_bytes));
  });
  return {{"step", step}, {"wait_ms", wait},      {"compute_ms", compute},
          {"t", t},       {"reserved", reserved}, {"allocated", allocated}};
}

json smi_json(const Diagnosis& d) {
  if (d.smi_trace.empty()) return nullptr;
  json seconds = json::array(), low = json::array(), high = json::array(), used = json::array();
  const auto& s = d.smi_trace;
  for_each_stretch(s.size(), kPageSeriesPoints, [&](std::size_t first, std::size_t last) {
    std::optional<double> lo, hi;
    std::optional<std::uint64_t> memory;
    for (std::size_t i = first; i < last; ++i) {
      if (const auto u = s[i].utilization_percent) {
        lo = std::min(lo.value_or(*u), *u);
        hi = std::max(hi.value_or(*u), *u);
      }
      if (const auto m = s[i].memory_used_bytes) memory = std::max(memory.value_or(0), *m);
    }
    seconds.push_back(microseconds(s[last - 1].seconds));
    low.push_back(optional_json(lo));
    high.push_back(optional_json(hi));
    used.push_back(optional_json(memory));
  });
  return {
      {"gpu", optional_json(d.smi_gpu)}, {"seconds", seconds},  {"utilization_min", low},
      {"utilization_max", high},         {"memory_used", used}, {"idle_fraction", optional_json(d.gpu_idle_fraction)}};
}

json ranks_json(const Diagnosis& d) {
  json ranks = json::array();
  if (d.ranks.size() < 2) return ranks;
  for (const auto& r : d.ranks) {
    json curve = nullptr;
    if (!r.timeline.empty()) {
      const CurveAxis axis(r.timeline);
      json x = json::array(), reserved = json::array(), allocated = json::array();
      for (const TimelineSample& p : r.timeline) {
        x.push_back(axis.timed() ? microseconds(*p.seconds) : static_cast<double>(p.trace_index));
        reserved.push_back(p.reserved_bytes);
        allocated.push_back(p.allocated_bytes);
      }
      curve = {{"x_unit", axis.timed() ? "s" : "event"}, {"x", x}, {"reserved", reserved}, {"allocated", allocated}};
    }
    ranks.push_back({{"rank", r.rank},
                     {"oom", r.oom},
                     {"worst", d.worst_rank == r.rank},
                     {"peak_reserved_bytes", optional_json(r.peak_reserved_bytes)},
                     {"peak_allocated_bytes", optional_json(r.peak_allocated_bytes)},
                     {"data_wait_fraction", optional_json(r.data_wait_fraction)},
                     {"curve", curve},
                     {"steps", r.step_times.empty() ? json(nullptr) : steps_json(r.step_times)}});
  }
  return ranks;
}

}  // namespace

json doctor_page_data(const Diagnosis& d) {
  return {{"verdict", std::string(diagnose::to_string(d.verdict))},
          {"phase", d.phase},
          {"capacity_bytes", optional_json(d.capacity_bytes)},
          {"segments", segments_json(d)},
          {"curve", curve_json(d)},
          {"steps", d.step_times.empty() ? json(nullptr) : steps_json(d.step_times)},
          {"smi", smi_json(d)},
          {"ranks", ranks_json(d)}};
}

}  // namespace fragscope::report
