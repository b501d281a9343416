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

int busiest_device(const Snapshot& snapshot) {
  int best = 0;
  std::size_t most = 0;
  for (std::size_t d = 0; d < snapshot.device_traces.size(); ++d) {
    if (snapshot.device_traces[d].size() > most) {
      most = snapshot.device_traces[d].size();
      best = static_cast<int>(d);
    }
  }
  return best;
}

std::optional<std::size_t> last_oom_index(const Snapshot& snapshot, int device) {
  const auto trace = snapshot.trace(device);
  for (std::size_t i = trace.size(); i-- > 0;)
    if (trace[i].action == TraceAction::kOom) return i;
  return std::nullopt;
}

}  // namespace fragscope::snapshot
