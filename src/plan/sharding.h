#pragma once
/// @file sharding.h
/// @brief Model state per GPU (parameters, gradients, optimizer state and the buffers a
/// parallel strategy adds) for each precision, optimizer and strategy.
///
/// Sources, per strategy:
///  - none / ddp: PyTorch keeps parameters and `.grad` in the parameter dtype; AdamW's exp_avg
///    and exp_avg_sq are `zeros_like(param)`; the foreach update materialises `sqrt(exp_avg_sq)`
///    for every tensor at once (one more state-sized buffer; measured: 20 × params bytes at
///    plan_p2's first optimizer step). DDP's reducer keeps a flat bucket copy of every gradient
///    (gradient_as_bucket_view=False, the default).
///  - fsdp (FSDP2, per-block fully_shard, bf16 param_dtype, fp32 reduce_dtype): fp32 shards of
///    parameters, gradients and optimizer state; the root's unsharded bf16 embedding/lm_head for
///    the whole step; per block two gathered bf16 copies (current + prefetched) and, in backward,
///    the unsharded bf16 gradient plus its fp32 reduce-scatter input.
///  - zero1/zero2/zero3: DeepSpeed's own estimators (stage_1_and_2.py: 4P + 16P/N bytes; stage3.py:
///    4·L_max + 18P/N), generalised to other optimizers by the state's bytes per parameter.

#include <cstdint>

#include "plan/job_spec.h"

namespace fragscope::plan {

/// @brief Bytes per GPU.
struct StateBytes {
  std::uint64_t parameters = 0;
  std::uint64_t gradients = 0;             ///< all of them, as after a full backward
  std::uint64_t optimizer_state = 0;
  std::uint64_t optimizer_temporaries = 0; ///< alive during the update only
  std::uint64_t ddp_buckets = 0;
  std::uint64_t gathered_outer = 0;        ///< FSDP root / ZeRO-3 largest layer, whole step
  std::uint64_t gathered_layers = 0;       ///< FSDP per-block buffers during a block's backward
  std::uint64_t outer_gradients = 0;       ///< lm_head + final norm grads (first in backward)
  std::uint64_t gradients_per_layer = 0;   ///< one block's grads
  std::uint64_t mlp_gradients_per_layer = 0;  ///< one block's three MLP matrices' grads
};

/// @brief Model-state bytes per GPU for `spec`. REQUIRES: validate(spec) passed.
StateBytes state_bytes(const JobSpec& spec);

}  // namespace fragscope::plan
