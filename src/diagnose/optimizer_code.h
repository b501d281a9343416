#pragma once
/// @file optimizer_code.h
/// @brief Whether an allocation was made by an optimizer's own code (AdamW's state, its
/// foreach temporaries), not by a closure the optimizer runs.
///
/// Lightning and other trainers pass `optimizer.step(closure)` the forward and backward pass:
/// their allocations run through `torch/optim/` too, below it. An allocation is the
/// optimizer's when, walking its Python frames from the innermost, a frame in `torch/optim/`
/// comes before any frame outside torch (the caller's own code).
/// Thread-safety: a pure function.

#include "snapshot/snapshot.h"

namespace fragscope::diagnose {

/// @brief True when `stack`'s innermost Python frames outside torch's other modules are in
/// `torch/optim/` (see the file comment).
bool made_by_optimizer(const snapshot::Snapshot& snapshot, snapshot::StackId stack);

}  // namespace fragscope::diagnose
