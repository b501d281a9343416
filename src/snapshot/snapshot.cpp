#include "snapshot/snapshot.h"

namespace fragscope::snapshot {

std::span<const TraceEvent> Snapshot::trace(int device) const {
  if (device < 0 || static_cast<std::size_t>(device) >= device_traces.size()) return {};
  return device_traces[static_cast<std::size_t>(device)];
}

std::string_view Snapshot::action_name(const TraceEvent& event) const {
  if (event.action == TraceAction::kOther) return strings.view(event.action_name);
  return to_string(event.action);
}

}  // namespace fragscope::snapshot
