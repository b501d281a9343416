#pragma once
/// @file cache_empties.h
/// @brief The job's own calls of torch.cuda.empty_cache() in a trace: the segments it released (cudaFree, or
/// unmapped pages under expandable segments) under a Python frame of torch/cuda/memory.py's empty_cache. The
/// allocator's own release when a cudaMalloc fails is no call: its stacks end in the failing malloc. Consecutive
/// releases under one stack are one call.
/// Thread-safety: a pure function.

#include <cstddef>

#include "diagnose/diagnosis.h"
#include "snapshot/snapshot.h"

namespace fragscope::diagnose {

/// @brief The calls in `device`'s trace before event `until`.
CacheEmpties find_cache_empties(const snapshot::Snapshot& snapshot, int device, std::size_t until);

}  // namespace fragscope::diagnose
