#pragma once
/// @file projected_runs.h
/// @brief The step projected from the trace (trace_projection.h), replayed at the capacity:
/// through the ideal packer (its peak: the live bytes the step needs with perfect packing) and
/// through every setting of the what-if sweep, at the capacity and, to see how robust the
/// answer is, at the capacity less margin_to_fit (when it runs; less relaid_start_margin more
/// when the setting starts from a mid-run trace's re-laid state) or plus margin_to_fail (when
/// it fails; then cuDNN workspaces that do not fit are refused, as ATen survives them, so that
/// a failure is the step's, not a plan's).
/// Thread-safety: runs the replays on up to `threads` threads, as many at once as the memory
/// budget of replay/replay_memory.h holds; call it from one.

#include <vector>

#include "diagnose/trace_projection.h"
#include "replay/capacity.h"
#include "replay/whatif.h"

namespace fragscope::diagnose {

/// @brief Fills step.figures' projected_peak_bytes, inelastic_peak_bytes and runs; its margins must be set.
void replay_projected_step(ProjectedStep& step, const std::vector<replay::WhatIfConfig>& configs,
                           const replay::Capacity& capacity, unsigned threads);

}  // namespace fragscope::diagnose
