#include "diagnose/optimizer_code.h"

#include <string_view>

namespace fragscope::diagnose {

bool made_by_optimizer(const snapshot::Snapshot& snapshot, snapshot::StackId stack) {
  for (const snapshot::FrameId frame : snapshot.stacks.stack(stack))
    if (snapshot.strings.view(snapshot.stacks.frame(frame).filename).find("torch/optim/") != std::string_view::npos)
      return true;
  return false;
}

}  // namespace fragscope::diagnose
