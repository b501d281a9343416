#include "diagnose/live_blocks.h"

#include <algorithm>

namespace fragscope::diagnose {

std::unordered_map<std::uint64_t, std::size_t> live_blocks_before(std::span<const snapshot::TraceEvent> trace,
                                                                  std::size_t index) {
  std::unordered_map<std::uint64_t, std::size_t> live;
  for (std::size_t i = 0; i < std::min(index, trace.size()); ++i) {
    if (trace[i].action == snapshot::TraceAction::kAlloc)
      live[trace[i].addr] = i;
    else if (trace[i].action == snapshot::TraceAction::kFreeCompleted)
      live.erase(trace[i].addr);
  }
  return live;
}

}  // namespace fragscope::diagnose
