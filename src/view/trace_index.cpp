#include "view/trace_index.h"

#include <fmt/format.h>

#include "util/error.h"

namespace fragscope::view {
namespace {

const snapshot::Snapshot& with_trace(const snapshot::Snapshot& snapshot, int device, const std::string& source) {
  if (snapshot.trace(device).empty()) {
    throw InputError(fmt::format("{}: device {} has no allocation trace to view (record it with "
                                 "torch.cuda.memory._record_memory_history() before the snapshot)",
                                 source, device));
  }
  if (snapshot.trace(device).size() >= kNoEvent) {
    throw InputError(fmt::format("{}: {} trace events on device {}: more than the view takes ({})", source,
                                 snapshot.trace(device).size(), device, kNoEvent - 1));
  }
  return snapshot;
}

}  // namespace

TraceIndex::TraceIndex(const snapshot::Snapshot& snapshot, int device, const std::string& source)
    : snapshot(with_trace(snapshot, device, source)),
      device(device),
      source(source),
      allocations(snapshot, device),
      curves(snapshot, device, allocations),
      live(allocations),
      segments(snapshot, device, allocations, live),
      sites(snapshot, allocations) {
  const auto events = trace();
  for (std::uint32_t i = 0; i < events.size(); ++i)
    if (events[i].action == snapshot::TraceAction::kOom) ooms.push_back(i);
  if (!ooms.empty()) last_oom = ooms.back();
}

}  // namespace fragscope::view
