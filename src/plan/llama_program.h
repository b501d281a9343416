#pragma once
/// @file llama_program.h
/// @brief HF `LlamaForCausalLM` training, emulated tensor by tensor: which tensors each step of
/// the forward and the backward allocates and frees, in the order PyTorch does.
///
/// The order and the lifetimes were read off the allocator traces of the H200 fixtures
/// (`stacks="python"`: each allocation names its line of modeling_llama.py, autocast, SDPA, the
/// autograd engine or FSDP2) and follow PyTorch's rules: a tensor lives while Python or a
/// saved-tensor slot of an autograd node holds it; nodes run in reverse creation order and
/// release what they saved when they finish; a gradient reaching a tensor that already has one
/// is added in place (out of place when the first one is a view); autocast caches each weight
/// cast until the autocast region exits; non-reentrant checkpointing keeps a block's input and
/// recomputes the block at its first saved tensor, stopping at the last one. docs/plan.md lists
/// every tensor.
///
/// Regimes (activation_model.h's ComputeMode): torch.autocast over fp32 parameters, low
/// precision (bf16 parameters, FSDP2 MixedPrecisionPolicy or DeepSpeed bf16), fp32.
/// What it leaves out: tensor/sequence/pipeline parallelism, torch.compile, CPU offload's host
/// memory, allocations under 4 KiB that do not depend on the job's sizes (scalars, RNG state).
/// Thread-safety: one LlamaProgram drives one tape from one thread.

#include <cstdint>
#include <memory>
#include <vector>

#include "plan/allocation_program.h"
#include "plan/job_spec.h"

namespace fragscope::plan {

/// @brief Multiprocessors of the job's GPU (or MIG slice): sizes the two-pass reductions'
/// buffers (PyTorch's ReduceConfig spreads a column reduction over up to 16 blocks per SM).
int streaming_multiprocessors(const JobSpec& spec);

class LlamaProgram {
 public:
  using Tensor = AllocationTape::Tensor;

  LlamaProgram(const JobSpec& spec, AllocationTape& tape);
  ~LlamaProgram();
  LlamaProgram(const LlamaProgram&) = delete;
  LlamaProgram& operator=(const LlamaProgram&) = delete;

  /// @brief Model construction on the GPU, FSDP sharding or DDP's buckets.
  void construct();
  /// @brief Micro-step `index`: one forward and backward of `seq_len` tokens per sequence
  /// (marked on the tape); gradients accumulate until release_gradients().
  void train_micro_step(std::uint64_t seq_len, std::uint32_t index);
  /// @brief model.eval(), one no-grad forward of `batch` × `seq_len` with the logits upcast
  /// and log_softmax'd (an evaluation loss), model.train(); marked as following micro-step `after`.
  void eval_pass(std::uint64_t batch, std::uint64_t seq_len, std::uint32_t after);

  /// @brief Each tensor the optimizer updates, in model.parameters() order (fp32 master weights
  /// or shards where the regime keeps them).
  struct OptimizedTensor {
    std::uint64_t elements = 0;
    std::uint64_t element_bytes = 4;
  };
  std::vector<OptimizedTensor> optimized_tensors() const;
  /// @brief optimizer.zero_grad(set_to_none=True).
  void release_gradients();
  /// @brief The activations one block keeps for its backward (its saved tensors and output;
  /// not autocast's weight casts nor the KV cache), the largest over the micro-steps so far.
  std::uint64_t block_activation_bytes() const;

  /// The emulated model (llama_program_impl.h), split over llama_*.cpp by concept.
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace fragscope::plan
