#include "plan/assumptions.h"

#include <fmt/format.h>

#include "alloc/alloc_config.h"
#include "plan/training_schedule.h"

namespace fragscope::plan {

std::vector<Assumption> assumptions(const JobSpec& spec) {
  const TrainingConfig& t = spec.training;
  std::vector<Assumption> out;
  std::string regime;
  switch (t.precision) {
    case Precision::kAmpBf16:
    case Precision::kAmpFp16:
      regime = fmt::format(
          "torch.autocast({}) over fp32 parameters: fp32 weights, gradients and optimizer state; "
          "each matmul casts its weight (cached until the forward ends) and its fp32 inputs",
          t.precision == Precision::kAmpBf16 ? "bfloat16" : "float16");
      if (spec.parallel.strategy == Strategy::kFsdp) regime += "; FSDP gathers fp32 parameters (no param_dtype)";
      break;
    case Precision::kMixedBf16:
      regime = spec.parallel.strategy == Strategy::kFsdp
                   ? "FSDP2 MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), no autocast: fp32 sharded "
                     "parameters and optimizer state, bf16 gathered parameters and activations"
                   : "DeepSpeed bf16: bf16 parameters and activations, fp32 master weights and optimizer state "
                     "partitioned";
      break;
    case Precision::kBf16:
      regime = "bf16 parameters, gradients, optimizer state and activations (no master copy)";
      break;
    case Precision::kFp32:
      regime = "fp32 everywhere, no autocast";
      break;
  }
  out.push_back({"precision_regime", std::string(to_string(t.precision)), regime});

  const bool deepspeed = spec.parallel.strategy == Strategy::kZero1 || spec.parallel.strategy == Strategy::kZero2 ||
                         spec.parallel.strategy == Strategy::kZero3;
  std::string impl;
  switch (t.optimizer) {
    case Optimizer::kAdamW8bit:
      impl = "bitsandbytes 8-bit AdamW: uint8 states with fp32 block scales, updated in place";
      break;
    case Optimizer::kSgd:
      impl = "SGD with momentum: one momentum buffer, updated in place";
      break;
    case Optimizer::kLion:
      impl = "Lion (lion-pytorch): one state, a cloned update per tensor";
      break;
    default:
      if (deepspeed)
        impl = "DeepSpeed FusedAdam: updates in place, no temporaries";
      else if (t.optimizer_impl == OptimizerImpl::kForeach)
        impl = "foreach (PyTorch's default on CUDA): sqrt(exp_avg_sq) of every tensor at once during the step";
      else if (t.optimizer_impl == OptimizerImpl::kFused)
        impl = "fused=True: one kernel, no temporaries";
      else
        impl = "foreach=False: one tensor at a time, two temporaries of the largest tensor";
  }
  if (t.cpu_offload != CpuOffload::kNone) impl += "; the state and the step on the host (cpu_offload)";
  std::string value = deepspeed ? "deepspeed" : std::string(to_string(t.optimizer_impl));
  if (t.optimizer == Optimizer::kAdamW8bit) value = "bitsandbytes";
  if (t.optimizer == Optimizer::kSgd || t.optimizer == Optimizer::kLion) value = std::string(to_string(t.optimizer));
  out.push_back({"optimizer_implementation", value, impl});

  out.push_back({"attention_kernel", std::string(to_string(t.attention)),
                 t.attention == Attention::kEager
                     ? "HF eager attention: softmax's fp32 s×s scores and their cast kept per block"
                     : "SDPA's flash kernel: q, k, v, the output and the log-sum-exp kept; no s×s scores"});

  std::string loss;
  switch (t.loss) {
    case Loss::kStandard:
      loss = "HF ForCausalLMLoss: bf16 logits, an fp32 copy and log_softmax over the vocabulary";
      break;
    case Loss::kChunked:
      loss = fmt::format("lm_head and cross-entropy per chunk of {} tokens, each recomputed in the backward",
                         t.loss_chunk_tokens);
      break;
    case Loss::kFused:
      loss = "fused linear cross-entropy (Liger): no full logits; gradients computed in the forward";
      break;
  }
  out.push_back({"loss", std::string(to_string(t.loss)), loss});

  const bool cache = t.use_cache && t.checkpointing != Checkpointing::kFull;
  out.push_back({"kv_cache", t.use_cache ? "use_cache=True" : "use_cache=False",
                 cache         ? "transformers builds a DynamicCache of every block's keys and values in training "
                                 "(dropped with the output, before the backward)"
                 : t.use_cache ? "off: transformers disables it under gradient checkpointing"
                               : "off"});

  std::string ckpt = "every block keeps its activations";
  if (t.checkpointing == Checkpointing::kFull) {
    const std::uint64_t k = t.checkpointed_layers.value_or(spec.model.num_layers);
    ckpt = fmt::format(
        "non-reentrant (transformers' default): {} of {} blocks keep only their input and are "
        "recomputed in the backward",
        k, spec.model.num_layers);
  } else if (t.checkpointing == Checkpointing::kSelective) {
    ckpt = "the attention core recomputed (Korthikanti et al.); its inputs kept";
  }
  out.push_back({"checkpointing", std::string(to_string(t.checkpointing)), ckpt});

  const std::string conf = alloc::to_alloc_conf(spec.hardware.alloc_config);
  out.push_back({"allocator", conf.empty() ? "default" : conf,
                 "PYTORCH_CUDA_ALLOC_CONF replayed through PyTorch's caching-allocator rules"});

  const std::vector<TrainingSchedule> schedules = planning_schedules(spec);
  const TrainingSchedule& schedule = schedules.front();
  if (t.variable_length) {
    const LengthDistribution lengths = length_distribution(spec);  // the defaults the draws fill in
    out.push_back(
        {"sequence_lengths", "variable",
         fmt::format("log-normal, median {}, σ {}, clipped to [{}, {}], multiples of 8; {} seeded draws of {} "
                     "micro-steps, each ending on {} with gradients and optimizer state present; the draw "
                     "that reserves the most is the estimate",
                     static_cast<std::uint64_t>(lengths.median), lengths.sigma, lengths.shortest, lengths.longest,
                     schedules.size(), schedule.lengths.count(), lengths.longest)});
  } else {
    out.push_back({"sequence_lengths", "fixed",
                   fmt::format("every micro-step {} × {} tokens; {} micro-steps ({} optimizer steps) replayed",
                               t.micro_batch_size, t.seq_len, schedule.lengths.count(),
                               schedule.lengths.count() / t.grad_accum)});
  }
  out.push_back({"eval", spec.eval ? "[eval]" : "none",
                 spec.eval ? fmt::format("model.eval() under no_grad and autocast, {} × {} tokens, logits upcast and "
                                         "log_softmax'd, after every {} optimizer steps",
                                         spec.eval->micro_batch_size, spec.eval->seq_len, spec.eval->every)
                           : "no eval pass in the plan (add an [eval] table): the canary measures it"});
  return out;
}

std::vector<std::string> left_out() {
  return {"tensor, sequence and pipeline parallelism",
          "torch.compile (fused kernels keep fewer intermediates)",
          "checkpoint saving (host copies; FSDP's full state dict gathers)",
          "NCCL's real buffer use (0.5 GiB per communicator assumed) and other processes on the GPU",
          "data loader pinned memory and other host memory",
          "tensors under 4 KiB that do not grow with the job (scalars, RNG state)"};
}

std::vector<std::string> warnings(const JobSpec& spec) {
  std::vector<std::string> out;
  if (!spec.hardware.mig.empty() && spec.parallel.world_size > 1)
    out.push_back(fmt::format(
        "{} over {} MIG slices: MIG instances have no P2P or NVLink between them, so every collective goes through "
        "host memory (NCCL's shared-memory transport): expect communication-bound steps; give each rank a whole GPU",
        to_string(spec.parallel.strategy), spec.parallel.world_size));
  if (spec.training.optimizer == Optimizer::kAdamW8bit)
    out.push_back("adamw-8bit needs bitsandbytes on the training image; its memory is derived, not measured here");
  if (spec.training.loss != Loss::kStandard)
    out.push_back(fmt::format("loss = \"{}\" is not what transformers does by default: the training code must use it",
                              to_string(spec.training.loss)));
  return out;
}

}  // namespace fragscope::plan
