#include "snapshot/snapshot.h"

#include <map>

namespace fragscope::snapshot {

void decode_annotation(Annotation& a, const StringTable& strings) {
  std::string_view stage;
  for (const auto& [key, value] : a.fields) {
    if (strings.view(key) == "stage") stage = strings.view(value);
    if (strings.view(key) == "name") a.name = value;
  }
  a.stage = stage == "START" ? AnnotationStage::kStart
            : stage == "END" ? AnnotationStage::kEnd
                             : AnnotationStage::kOther;
}

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

int device_holding_memory(const Snapshot& snapshot) {
  std::map<int, std::uint64_t> reserved;
  for (const Segment& segment : snapshot.segments) reserved[segment.device] += segment.total_size;
  int best = -1;
  for (const auto& [device, bytes] : reserved)
    if (best < 0 || bytes > reserved[best]) best = device;
  return best >= 0 ? best : busiest_device(snapshot);
}

std::optional<std::size_t> last_oom_index(const Snapshot& snapshot, int device) {
  const auto trace = snapshot.trace(device);
  for (std::size_t i = trace.size(); i-- > 0;)
    if (trace[i].action == TraceAction::kOom) return i;
  return std::nullopt;
}

}  // namespace fragscope::snapshot
