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

}  // namespace fragscope::diagnose
