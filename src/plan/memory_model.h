#pragma once
/// @file memory_model.h
/// @brief Per-GPU memory of a training job: what is alive at each moment of a micro-step and
/// of the optimizer step, the peak over them, the allocator's headroom, and whether it fits.
///
/// Moments modelled (docs/plan.md has the equations): the end of the loss forward (all saved
/// activations, the KV cache, logits), the loss backward (log_softmax's gradients), each decoder
/// block's backward (checkpointed blocks are recomputed here; in the first micro-step of an
/// accumulation cycle the gradients grow block by block), and the optimizer step (AdamW's state
/// plus its foreach temporaries). "Allocated" is what `torch.cuda.max_memory_allocated()`
/// reports; "reserved" adds the caching allocator's headroom.
///
/// Thread-safety: pure functions of their arguments.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "plan/job_spec.h"

namespace fragscope::plan {

/// @brief The canary's HBM criterion (docs/criteria.md: reserved_bytes.all.peak / device memory):
/// a recommended configuration must stay under it, not merely fit.
inline constexpr double kMaxHbmFraction = 0.90;

/// @brief One named part of the live memory ("activations", "optimizer_state", …).
struct MemoryItem {
  std::string_view key;
  std::uint64_t bytes = 0;
};

/// @brief The live memory at one moment and what it is made of.
struct PhasePeak {
  std::string_view phase;  ///< "forward (loss)", "backward (loss)", "backward (blocks)", "optimizer step", …
  std::uint64_t bytes = 0;  ///< sum of items
  std::vector<MemoryItem> items;

  std::uint64_t item(std::string_view key) const;
};

/// @brief What already exists when a micro-step starts.
struct StepState {
  bool gradients = false;        ///< .grad kept from the previous micro-step (accumulation)
  bool optimizer_state = false;  ///< after the first optimizer step
  bool backward_ran = false;     ///< the autograd thread's cuBLAS workspace exists
};

/// @brief The live memory at each modelled moment of one micro-step (not the optimizer step).
std::vector<PhasePeak> micro_step_phases(const JobSpec& spec, const StepState& state);

/// @brief The optimizer step: parameters, gradients, state and the update's temporaries.
PhasePeak optimizer_step_phase(const JobSpec& spec);

/// @brief The whole per-GPU estimate.
struct MemoryEstimate {
  PhasePeak peak;                        ///< the phase with the most allocated bytes
  std::vector<PhasePeak> phases;         ///< every modelled phase of the steady state
  std::uint64_t parameters = 0;          ///< model parameter count
  std::uint64_t activations_per_layer_bytes = 0;  ///< one block's saved tensors for one micro-batch
  std::uint64_t peak_allocated_bytes = 0;
  double headroom_fraction = 0;          ///< reserved = allocated × (1 + headroom)
  std::uint64_t peak_reserved_bytes = 0;
  std::uint64_t cuda_context_bytes = 0;  ///< driver reserve + CUDA context (outside PyTorch)
  std::uint64_t communication_bytes = 0; ///< NCCL buffers (outside PyTorch)
  std::uint64_t device_bytes = 0;        ///< the card's (or MIG slice's) memory
  std::uint64_t usable_bytes = 0;        ///< device − context − communication
  bool fits = false;                     ///< peak reserved ≤ usable
  bool within_hbm_limit = false;         ///< fits and peak reserved ≤ kMaxHbmFraction × device
  std::int64_t margin_bytes = 0;         ///< usable − peak reserved (negative: short by)
};

/// @brief Estimates the steady state: every micro-step after the first optimizer step, with
/// gradients kept between micro-steps when grad_accum > 1.
/// REQUIRES: `spec` passed validate().
MemoryEstimate estimate_memory(const JobSpec& spec);

/// @brief Peak allocated bytes of each micro-step of a run whose micro-steps have the given
/// sequence lengths (telemetry's seq_len), starting from a fresh model: for checking the model
/// against recorded runs. The optimizer step's peak counts in the micro-step that triggers it.
std::vector<std::uint64_t> simulate_micro_steps(const JobSpec& spec, std::span<const std::uint64_t> seq_lens);

/// @brief Allocator headroom used for reserved bytes: 5% with expandable segments, 25% with
/// variable sequence lengths, 15% otherwise (the largest reserved/allocated ratios measured on the
/// H200 fixtures of each kind; docs/PLAN_ACCURACY.md).
double allocator_headroom(const JobSpec& spec);

}  // namespace fragscope::plan
