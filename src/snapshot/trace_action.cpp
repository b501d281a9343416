#include "snapshot/trace_action.h"

namespace fragscope::snapshot {

namespace {

constexpr std::array<std::string_view, kTraceActionCount> kNames = {
    "alloc",         "free_requested", "free_completed", "segment_alloc",
    "segment_free",  "segment_map",    "segment_unmap",  "snapshot",
    "oom",           "user_defined",   "annotate",       "other",
};

}  // namespace

std::string_view to_string(TraceAction action) { return kNames[static_cast<std::size_t>(action)]; }

std::optional<TraceAction> parse_trace_action(std::string_view name) {
  for (std::size_t i = 0; i + 1 < kNames.size(); ++i)
    if (kNames[i] == name) return static_cast<TraceAction>(i);
  return std::nullopt;
}

}  // namespace fragscope::snapshot
