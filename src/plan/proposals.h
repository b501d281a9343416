#pragma once
/// @file proposals.h
/// @brief The changes people propose when a job does not fit (checkpointing, smaller
/// micro-batches, more GPUs, MIG slices, expandable segments, a target global batch), each
/// re-estimated, priced in throughput, and checked for whether it can work at all.
///
/// Throughput factors (tokens/s per GPU relative to the job as specified) and their sources:
/// full checkpointing 0.75 (one extra forward per block: the forward is ~1/3 of a training
/// step's FLOPs), selective 0.973 (Korthikanti et al. 2022: +2.7% FLOPs), a MIG slice g/7 (its
/// share of the SMs), expandable segments 1.0 ("negligible throughput cost", torchrec PR #4375),
/// a smaller micro-batch 1.0 while it keeps ≥ 8192 tokens, else 0.95 (smaller GEMMs; an
/// estimate, not a measurement).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plan/job_spec.h"
#include "plan/memory_model.h"

namespace fragscope::plan {

struct Proposal {
  std::string name;    ///< "activation checkpointing: full"
  std::string change;  ///< the edit to the job spec or environment
  JobSpec spec;        ///< the job with the change applied
  MemoryEstimate estimate;
  double throughput_factor = 1.0;  ///< tokens/s per GPU relative to the current job
  std::string cost;                ///< the throughput cost in words
  bool workable = true;            ///< false: it cannot work whatever the memory says
  bool more_hardware = false;      ///< needs more GPUs or a larger MIG slice than the job has
  std::string problem;             ///< why it cannot work, or why it is pointless
};

struct ProposalSet {
  MemoryEstimate current;
  std::uint64_t current_global_batch = 0;
  std::optional<std::uint64_t> target_global_batch;
  std::vector<Proposal> proposals;
  std::optional<std::size_t> recommended;  ///< index into proposals; none when the job is fine as is
  std::string recommendation;              ///< one sentence: what and why
};

/// @brief Builds and evaluates the alternatives for `spec`. The recommendation is the workable
/// proposal within the canary's HBM limit (MemoryEstimate::within_hbm_limit) that needs no more
/// hardware, with the highest throughput factor, ties to the larger margin (proposals that need
/// more hardware only when none on the same hardware works); the job is kept as is when it is within the
/// limit and already has the target global batch.
/// @param target_global_batch sequences per optimizer step to keep (default: the spec's
/// `global_batch`, else its current mbs × grad_accum × world_size).
ProposalSet propose(const JobSpec& spec, std::optional<std::uint64_t> target_global_batch);

}  // namespace fragscope::plan
