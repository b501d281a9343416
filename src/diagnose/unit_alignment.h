#pragma once
/// @file unit_alignment.h
/// @brief Which allocations of one repeating unit (a training step, an eval batch) are the same
/// statements as which of another, by call stack (sequence_alignment.h), and the ratio of their
/// sizes: what trace_projection.h projects the failing unit from.
/// Thread-safety: pure functions over read-only inputs.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "diagnose/sequence_alignment.h"
#include "snapshot/snapshot.h"

namespace fragscope::diagnose {

/// @brief The first `na` allocations of `a` (trace events, with their call stacks) aligned with
/// the first `nb` of `b`, by call stack; nullopt when too many insertions and deletions
/// separate them. Allocations without frames (autograd's backward pass when only Python stacks
/// were recorded) are aligned by size too: the framed ones alone give the units' scale, then a
/// frame-less pair must have sizes equal or in the ratio of that scale or its square. A lone
/// allocation of each unit between two pairs (or a's next and b's last after the last pair) is
/// paired too when their sizes are so related and 1 MiB or more: the same allocation reached
/// through another code path (cuDNN's plan search in a run's first step, its plan cache after).
/// `scale` receives b's sizes / a's.
std::optional<AlignedPairs> align_units(std::span<const snapshot::TraceEvent> trace, const std::vector<std::size_t>& a,
                                        const std::vector<std::uint32_t>& a_stacks, std::size_t na,
                                        const std::vector<std::size_t>& b, const std::vector<std::uint32_t>& b_stacks,
                                        std::size_t nb, double& scale);

/// @brief The failing unit's prefix `b` aligned, from its end, with a unit `a` whose record a
/// ring or a late history start cut (the trace's first; its first `window` allocations looked
/// at): only its tail is in the trace, so the two are matched backwards from the failing malloc
/// (b's last; each counterpart of its call stack in `a` tried, the most bytes matched kept) and
/// b's head before the first pair has none. Returns pairs in ascending order, the failing
/// malloc's last; `scale` receives b's sizes / a's.
std::optional<AlignedPairs> align_cut_unit(std::span<const snapshot::TraceEvent> trace,
                                           const std::vector<std::size_t>& a_allocs,
                                           const std::vector<std::uint32_t>& a_stacks_all, std::size_t window,
                                           const std::vector<std::size_t>& b_allocs,
                                           const std::vector<std::uint32_t>& b_stacks_all, double& scale);

}  // namespace fragscope::diagnose
