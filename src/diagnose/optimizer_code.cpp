#include "diagnose/optimizer_code.h"

#include <string_view>

#include "diagnose/python_frames.h"

namespace fragscope::diagnose {

bool made_by_optimizer(const snapshot::Snapshot& snapshot, snapshot::StackId stack) {
  for (const snapshot::FrameId frame : snapshot.stacks.stack(stack)) {  // innermost first
    if (!is_python_frame(snapshot, frame)) continue;
    const std::string_view inside = torch_path(snapshot.strings.view(snapshot.stacks.frame(frame).filename));
    if (inside.empty()) return false;  // the caller's code: a closure the optimizer runs, or no optimizer
    if (inside.starts_with("optim/")) return true;
  }
  return false;
}

std::optional<std::size_t> optimizer_step_start(const snapshot::Snapshot& snapshot,
                                                std::span<const snapshot::TraceEvent> trace, std::size_t oom_index) {
  if (trace[oom_index].stack == 0 || !made_by_optimizer(snapshot, trace[oom_index].stack)) return std::nullopt;
  std::size_t first = oom_index;
  while (first > 0) {
    const snapshot::TraceEvent& e = trace[first - 1];
    if (e.action == snapshot::TraceAction::kAlloc && e.stack != 0 && !made_by_optimizer(snapshot, e.stack)) break;
    --first;
  }
  return first;
}

}  // namespace fragscope::diagnose
