#pragma once
/// @file run_growth.h
/// @brief A run that grows: blocks that earlier steps left live at the failing malloc, from call stacks that left
/// some in every one of them (a step's outputs kept for the epoch's metrics, a cache filled per step). Such a run
/// needs more at every step, whatever the allocator does: the step after the failing one needs its peak and one
/// step's growth more.
///
/// A step here is the span from one unit's start (trace_units.h) to the next unit's. The span just before the
/// failing unit is left out: it holds the failing iteration's forward and the step before's gradients, which the
/// failing step frees. From the span before it back (the newest 64 at most), spans count while the call stacks that
/// left blocks in all of them left at least kMinGrowthBytes in each. The run grows when at least kMinGrowingSteps
/// spans count and at least half of those looked at: a queue of batches prefetched a few steps ahead, each freed
/// when its step runs, is no growth. Eval batches count as steps: a validation that keeps each batch's outputs
/// (Lightning's `validation_step_outputs`) grows; HF's Trainer concatenating them frees the older concatenation, so
/// only the span before the failing batch holds one (memory_advice.h names that).
///
/// A run can also grow by remaking a tensor larger at every step and freeing the one before (a KV cache grown by
/// torch.cat at each decoded token): no span leaves blocks live, but the memory live at each unit's start rises.
/// That counts (RunGrowth::regrown) when it rose by kMinGrowthBytes or more at each of the newest
/// kMinRegrownSteps unit starts at least, and at half of those looked at: batches of random size rise eight times
/// in a row one time in 40,320.
/// Thread-safety: a pure function.

#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "diagnose/diagnosis.h"
#include "diagnose/trace_units.h"
#include "snapshot/snapshot.h"

namespace fragscope::diagnose {

inline constexpr std::size_t kMinGrowingSteps = 2;
inline constexpr std::uint64_t kMinGrowthBytes = std::uint64_t{1} << 20;
inline constexpr std::size_t kMinRegrownSteps = 8;

/// @brief The growth up to the failing malloc of `device`'s trace: `live`, the blocks live before it
/// (live_blocks.h), and `units`, the units found up to it.
RunGrowth find_run_growth(const snapshot::Snapshot& snapshot, int device,
                          const std::unordered_map<std::uint64_t, std::size_t>& live, const TraceUnits& units);

}  // namespace fragscope::diagnose
