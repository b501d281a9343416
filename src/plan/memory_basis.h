#pragma once
/// @file memory_basis.h
/// @brief Whether a job's predicted memory rests on H200 recordings: the parts of its allocation
/// program that no recording exercises (docs/PLAN_ACCURACY.md, "What is derived, not measured").
/// Those parts follow their library's code inside measured mechanisms around them; every other
/// part of the spec (the model's shape, amp-bf16/bf16/fp32 on one GPU, one-rank FSDP2, AdamW
/// foreach/fused/single-tensor, SGD, full or partial checkpointing, SDPA and eager attention, the
/// standard and the chunked loss, use_cache, fixed and variable lengths, an eval pass,
/// expandable_segments, max_split_size_mb and roundup_power2_divisions) was recorded.
/// Thread-safety: pure functions.

#include <string>
#include <vector>

#include "plan/job_spec.h"

namespace fragscope::plan {

/// @brief The parts of `spec` no recording exercises, each a short phrase; empty: all measured.
std::vector<std::string> derived_parts(const JobSpec& spec);

/// @brief "measured" when derived_parts(spec) is empty, else "derived".
std::string memory_basis(const JobSpec& spec);

}  // namespace fragscope::plan
