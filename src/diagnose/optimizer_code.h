#pragma once
/// @file optimizer_code.h
/// @brief Whether an allocation was made by an optimizer: its call stack runs through
/// `torch/optim/` (AdamW's state, its foreach temporaries).
/// Thread-safety: a pure function.

#include "snapshot/snapshot.h"

namespace fragscope::diagnose {

/// @brief True when a frame of `stack` is in a file under `torch/optim/`.
bool made_by_optimizer(const snapshot::Snapshot& snapshot, snapshot::StackId stack);

}  // namespace fragscope::diagnose
