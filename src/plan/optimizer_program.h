#pragma once
/// @file optimizer_program.h
/// @brief The optimizer step's allocations, tensor by tensor: the state created at the first
/// step (in parameter order, exp_avg then exp_avg_sq of each) and the update's temporaries.
///
/// Sources: torch/optim/adam.py (Adam._init_group: `step` on the GPU before exp_avg under
/// fused=True; _multi_tensor_adam: torch._foreach_sqrt makes one temporary per tensor, freed in
/// reverse order when its list dies; _fused_adam: none; _single_tensor_adam: sqrt and the
/// division per tensor, the previous `denom` freed when rebound), torch/optim/sgd.py (with
/// momentum the buffer clones the gradient), lion-pytorch (a cloned and an updated copy of
/// exp_avg per tensor), bitsandbytes Adam8bit (uint8 states and fp32 absmax per 256 elements
/// for tensors of 4096 elements or more, fp32 states below), DeepSpeed FusedAdam (in place).
/// The fixtures' traces confirm the AdamW foreach order; the recorded q_fused, q_single and
/// q_sgd runs (tests/data/plan) the fused, single-tensor and SGD steps. 8-bit AdamW and Lion
/// are derived from their libraries' code (neither library was on the recording machine).
/// Thread-safety: drives one tape from one thread.

#include <span>
#include <vector>

#include "plan/allocation_program.h"
#include "plan/job_spec.h"
#include "plan/llama_program.h"

namespace fragscope::plan {

class OptimizerProgram {
 public:
  OptimizerProgram(const JobSpec& spec, AllocationTape& tape);

  /// @brief optimizer.step() over `tensors` (the same list every step).
  void step(std::span<const LlamaProgram::OptimizedTensor> tensors);

 private:
  const JobSpec& spec_;
  AllocationTape& tape_;
  bool initialized_ = false;
  std::vector<AllocationTape::Tensor> state_;
};

}  // namespace fragscope::plan
