#pragma once
/// @file optimizer_program.h
/// @brief The optimizer step's allocations, tensor by tensor: the state created at the first
/// step (in parameter order, exp_avg then exp_avg_sq of each) and the update's temporaries.
///
/// Sources: torch/optim/adamw.py (_init_group; _multi_tensor_adamw: torch._foreach_sqrt makes
/// one temporary per tensor, freed in reverse order when its list dies; _fused_adamw: none;
/// _single_tensor_adamw: sqrt and the division per tensor, the previous `denom` freed when
/// rebound), torch/optim/sgd.py (the momentum buffer clones the gradient), lion-pytorch (a
/// cloned and an updated copy of exp_avg per tensor), bitsandbytes Adam8bit (uint8 states and
/// fp32 absmax per 256 elements for tensors of 4096 elements or more, fp32 states below),
/// DeepSpeed FusedAdam (in place). The fixtures' traces confirm the AdamW foreach order.
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
