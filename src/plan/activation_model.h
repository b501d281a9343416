#pragma once
/// @file activation_model.h
/// @brief What one training micro-step of a HF `LlamaForCausalLM` keeps alive, per token, tensor
/// by tensor (docs/plan.md derives every term from the modeling code).
///
/// Three numeric regimes, chosen by precision and parallel strategy:
///  - autocast: fp32 parameters under `torch.autocast(bf16|fp16)` (amp-*, strategy none/ddp).
///    The residual stream stays fp32, every linear casts its input separately, rotary promotes
///    q/k to fp32, the KV cache is fp32, and bf16 copies of every weight live from forward to
///    backward (autocast's weight cache).
///  - low precision: bf16/fp16 parameters (bf16, or FSDP2 MixedPrecisionPolicy / DeepSpeed bf16).
///    RMSNorm upcasts to fp32 internally; projections share the norm output.
///  - fp32: no autocast.
/// Checked tensor by tensor against the allocator traces of the H200 fixtures (plan_p1/p2 and
/// the recorded shapes in tests/data/plan).

#include <cstdint>

#include "plan/job_spec.h"

namespace fragscope::plan {

enum class ComputeMode { kAutocast, kLowPrecision, kFp32 };

/// @brief The regime a job runs in (see the file comment).
ComputeMode compute_mode(const JobSpec& spec);

/// @brief Per-token byte counts (multiply by micro_batch_size × seq_len) unless noted.
struct ActivationModel {
  std::uint64_t saved_per_layer = 0;       ///< kept by autograd for one block, no checkpointing
  std::uint64_t checkpoint_per_layer = 0;  ///< kept for one block under full checkpointing (its input)
  std::uint64_t mlp_saved_per_layer = 0;   ///< the MLP half of saved_per_layer (freed first in backward)
  std::uint64_t kv_cache_per_layer = 0;    ///< HF DynamicCache copies not shared with saved tensors
  std::uint64_t final_forward = 0;         ///< final norm and lm_head input, during the loss forward
  std::uint64_t final_backward = 0;        ///< the same once the model output is dropped
  std::uint64_t logits_forward = 0;        ///< bf16 logits + fp32 upcast + log_softmax output
  std::uint64_t logits_backward = 0;       ///< log_softmax output + its gradient in and out
  std::uint64_t block_backward_transient = 0;  ///< gradient buffers inside one block's backward
  std::uint64_t attention_backward_transient = 0;  ///< eager scores' gradients, on top of saved
  std::uint64_t scores_forward_transient = 0;  ///< eager scores alive in a no-grad (checkpointed) forward
  // Per micro-step, not per token:
  std::uint64_t rope_bytes = 0;         ///< cos and sin tables, shared by all blocks
  std::uint64_t attention_mask_bytes = 0;  ///< eager's 4-D causal mask
  std::uint64_t weight_copy_bytes = 0;  ///< autocast's low-precision copies of all matmul weights
  std::uint64_t weight_grad_transient = 0;  ///< one MLP matrix's grad before it is accumulated
};

/// @brief The per-token model for `spec` (its shape, precision, attention, checkpointing and
/// use_cache; the strategy only through compute_mode()).
ActivationModel activation_model(const JobSpec& spec);

}  // namespace fragscope::plan
