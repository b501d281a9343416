#pragma once
/// @file projected_runs.h
/// @brief The step projected from the trace (trace_projection.h), replayed at the capacity:
/// through the ideal packer (its peak: the live bytes the step needs with perfect packing) and
/// through every setting of the what-if sweep, at the capacity and, to see how robust the
/// answer is, at the capacity less margin_to_fit (when it runs; less relaid_start_margin more
/// when the setting starts from a mid-run trace's re-laid state) or, when it fails, plus
/// kProjectionFloor and plus margin_to_fail (then cuDNN workspaces that do not fit are refused,
/// as ATen survives them, so that a failure is the step's, not a plan's).
/// Thread-safety: runs the replays on up to `threads` threads, as many at once as the memory
/// budget of replay/replay_memory.h holds; call it from one.

#include <vector>

#include "diagnose/trace_projection.h"
#include "replay/capacity.h"
#include "replay/whatif.h"

namespace fragscope::diagnose {

/// The least error assumed of a projected step, on both sides (a share of the capacity; traced_oom_verdict.cpp tells
/// the recordings behind it): a setting must run it with this much to spare to decide fragmentation, and every
/// setting must fail with this much more to decide capacity. Field qat_lo's step, projected from the job's first
/// step to 0.2% under the capacity with perfect packing, ran under expandable segments at 17.27 of 17.31 GiB, where
/// no setting ran the projection at the capacity itself.
inline constexpr double kProjectionFloor = 0.005;

/// @brief Fills step.figures' projected_peak_bytes, inelastic_peak_bytes and runs; its margins must be set.
void replay_projected_step(ProjectedStep& step, const std::vector<replay::WhatIfConfig>& configs,
                           const replay::Capacity& capacity, unsigned threads);

}  // namespace fragscope::diagnose
