#include "metrics/trace_summary.h"

#include <algorithm>

#include "util/shown_text.h"

namespace fragscope::metrics {

using snapshot::TraceAction;

TraceSummary summarize_trace(const snapshot::Snapshot& snapshot, int device) {
  TraceSummary summary;
  const auto trace = snapshot.trace(device);
  summary.entries = trace.size();
  std::array<std::uint64_t, snapshot::kTraceActionCount> counts{};
  std::map<std::string, std::uint64_t> other;
  std::int64_t reserved = 0;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const auto& e = trace[i];
    ++counts[static_cast<std::size_t>(e.action)];
    if (e.action == TraceAction::kOther) ++other[std::string(snapshot.action_name(e))];
    if (e.time_us != 0) {
      if (summary.first_time_us == 0 || e.time_us < summary.first_time_us) summary.first_time_us = e.time_us;
      summary.last_time_us = std::max(summary.last_time_us, e.time_us);
    }
    switch (e.action) {
      case TraceAction::kSegmentAlloc:
      case TraceAction::kSegmentMap:
        reserved += static_cast<std::int64_t>(e.size);
        summary.peak_reserved_rise = std::max(summary.peak_reserved_rise, reserved);
        break;
      case TraceAction::kSegmentFree:
      case TraceAction::kSegmentUnmap:
        reserved -= static_cast<std::int64_t>(e.size);
        break;
      case TraceAction::kOom:
        summary.ooms.push_back({i, e.size, e.addr, e.time_us});
        summary.reserved_rise_at_oom.push_back(reserved);
        break;
      default:
        break;
    }
  }
  summary.net_reserved_change = reserved;
  for (std::size_t a = 0; a < counts.size(); ++a) {
    const auto action = static_cast<TraceAction>(a);
    if (counts[a] && action != TraceAction::kOther) summary.actions[std::string(to_string(action))] = counts[a];
  }
  for (auto& [name, count] : other) summary.actions[shown_name(name)] += count;
  return summary;
}

}  // namespace fragscope::metrics
