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

#include <cstddef>
#include <optional>
#include <span>

#include "snapshot/snapshot.h"

namespace fragscope::diagnose {

/// @brief True when `stack`'s innermost Python frames outside torch's other modules are in
/// `torch/optim/` (see the file comment).
bool made_by_optimizer(const snapshot::Snapshot& snapshot, snapshot::StackId stack);

/// @brief The first event of the optimizer step that ends at `trace[oom_index]`: the run of allocations made by
/// the optimizer's code up to it (allocations without frames do not break it); nullopt when the optimizer did not
/// make the failing allocation.
std::optional<std::size_t> optimizer_step_start(const snapshot::Snapshot& snapshot,
                                                std::span<const snapshot::TraceEvent> trace, std::size_t oom_index);

}  // namespace fragscope::diagnose
