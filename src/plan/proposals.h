#pragma once
/// @file proposals.h
/// @brief Every lever a practitioner reaches for when a job does not fit, each applied to the
/// spec, replayed through the allocator model (memory_model.h) and priced in throughput
/// (throughput_model.h, an estimate): checkpointing (all blocks, the fewest blocks that fit,
/// selective), smaller micro-batches, expandable segments, the optimizer's implementation
/// (fused, one tensor at a time), 8-bit AdamW, CPU offload, a chunked or fused cross-entropy,
/// use_cache=False, more GPUs, MIG slices, and combinations; and the largest micro-batch and
/// sequence length that fit.
///
/// Every proposal keeps the target global batch (the spec's global_batch, --global-batch,
/// else today's) by adjusting grad_accum, or is flagged as unable to reach it. The
/// recommendation is the workable proposal within the canary's HBM limit that needs no more
/// hardware and keeps the numerics, with the highest throughput factor, ties to the lower peak
/// reserved; then numerics-changing ones (8-bit AdamW), then more hardware. A job within the
/// limit that already has the target global batch is kept as is.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plan/job_spec.h"
#include "plan/memory_model.h"

namespace fragscope::plan {

struct Proposal {
  std::string name;                    ///< "activation checkpointing: full"
  std::string change;                  ///< the edit to the job spec or environment, for people
  std::vector<std::string> overrides;  ///< the same as `fragscope plan --set` arguments
  JobSpec spec;                        ///< the job with the change applied
  MemoryEstimate estimate;
  double throughput_factor = 1.0;  ///< tokens/s per GPU relative to the current job (estimate)
  std::string cost;                ///< the throughput cost in words, with its basis
  /// memory_basis(spec): "measured" when every part of the changed job was recorded on the
  /// H200, "derived" when a part follows its library's code only (memory_basis.h).
  std::string memory_basis = "measured";
  bool workable = true;           ///< false: it cannot work whatever the memory says
  bool more_hardware = false;     ///< needs more GPUs or a larger MIG slice than the job has
  bool changes_numerics = false;  ///< changes what is computed (8-bit optimizer state)
  std::string problem;            ///< why it cannot work, or why it is pointless
};

struct ProposalSet {
  MemoryEstimate current;
  std::uint64_t current_global_batch = 0;
  std::uint64_t target_global_batch = 0;
  std::vector<Proposal> proposals;
  std::optional<std::size_t> recommended;  ///< index into proposals; none when the job is fine as is
  std::string recommendation;              ///< one sentence: what and why
};

/// @brief Builds and evaluates the alternatives for `spec`, whose estimate is `current`.
/// @param target_global_batch sequences per optimizer step to keep (default: the spec's
/// `global_batch`, else its current mbs × grad_accum × world_size).
/// @throws InputError when the target is not a multiple of world_size (no micro-batch reaches it).
ProposalSet propose(const JobSpec& spec, const MemoryEstimate& current,
                    std::optional<std::uint64_t> target_global_batch);

/// @brief The largest micro-batch (at the spec's seq_len) and the largest seq_len (at its
/// micro-batch, a multiple of 8) within the canary's HBM limit; nullopt when not even 1 fits.
struct LargestFit {
  std::optional<std::uint64_t> micro_batch_size;
  std::optional<MemoryEstimate> at_micro_batch;
  std::optional<std::uint64_t> seq_len;
  std::optional<MemoryEstimate> at_seq_len;
};
LargestFit largest_fit(const JobSpec& spec);

}  // namespace fragscope::plan
