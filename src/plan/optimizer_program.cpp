#include "plan/optimizer_program.h"

namespace fragscope::plan {
namespace {

constexpr std::uint64_t kMin8bitElements = 4096;   // bitsandbytes' min_8bit_size
constexpr std::uint64_t kBlockwiseElements = 256;  // bitsandbytes' blockwise quantization block

}  // namespace

OptimizerProgram::OptimizerProgram(const JobSpec& spec, AllocationTape& tape) : spec_(spec), tape_(tape) {}

void OptimizerProgram::step(std::span<const LlamaProgram::OptimizedTensor> tensors) {
  const Optimizer optimizer = spec_.training.optimizer;
  const bool deepspeed = spec_.parallel.strategy == Strategy::kZero1 || spec_.parallel.strategy == Strategy::kZero2 ||
                         spec_.parallel.strategy == Strategy::kZero3;
  const OptimizerImpl impl = deepspeed ? OptimizerImpl::kFused : spec_.training.optimizer_impl;
  auto bytes = [](const LlamaProgram::OptimizedTensor& t) { return t.elements * t.element_bytes; };
  const bool adam = optimizer == Optimizer::kAdamW || optimizer == Optimizer::kAdam;
  if (!initialized_) {
    initialized_ = true;
    for (const auto& t : tensors) {
      switch (optimizer) {
        case Optimizer::kAdamW:
        case Optimizer::kAdam:
          // torch's fused (and capturable) Adam keeps each tensor's `step` on the GPU (fp32
          // scalar, created first); foreach and single-tensor keep it on the host
          if (!deepspeed && impl == OptimizerImpl::kFused)
            state_.push_back(tape_.alloc(4, MemoryRole::kOptimizerState));
          state_.push_back(tape_.alloc(bytes(t), MemoryRole::kOptimizerState));  // exp_avg
          state_.push_back(tape_.alloc(bytes(t), MemoryRole::kOptimizerState));  // exp_avg_sq
          break;
        case Optimizer::kAdamW8bit:
          if (t.elements < kMin8bitElements) {
            state_.push_back(tape_.alloc(4 * t.elements, MemoryRole::kOptimizerState));
            state_.push_back(tape_.alloc(4 * t.elements, MemoryRole::kOptimizerState));
            break;
          }
          for (int i = 0; i < 2; ++i) {
            state_.push_back(tape_.alloc(t.elements, MemoryRole::kOptimizerState));
            state_.push_back(tape_.alloc(4 * ((t.elements + kBlockwiseElements - 1) / kBlockwiseElements),
                                         MemoryRole::kOptimizerState));
          }
          break;
        case Optimizer::kSgd:   // momentum_buffer = clone(grad)
        case Optimizer::kLion:  // exp_avg
          state_.push_back(tape_.alloc(bytes(t), MemoryRole::kOptimizerState));
          break;
      }
    }
  }
  if (optimizer == Optimizer::kLion) {
    // update = exp_avg.clone().mul_(β1).add(grad, …).sign_(): two copies, the clone dies first
    AllocationTape::Tensor previous = AllocationTape::kNone;
    for (const auto& t : tensors) {
      const auto clone = tape_.alloc(bytes(t), MemoryRole::kOptimizerTemporaries);
      const auto update = tape_.alloc(bytes(t), MemoryRole::kOptimizerTemporaries);
      tape_.free(clone);
      tape_.free(previous);
      previous = update;
    }
    tape_.free(previous);
    return;
  }
  if (!adam || impl == OptimizerImpl::kFused) return;
  if (impl == OptimizerImpl::kForeach) {
    std::vector<AllocationTape::Tensor> roots;
    for (const auto& t : tensors) roots.push_back(tape_.alloc(bytes(t), MemoryRole::kOptimizerTemporaries));
    for (auto it = roots.rbegin(); it != roots.rend(); ++it) tape_.free(*it);
    return;
  }
  // single tensor: denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
  AllocationTape::Tensor previous = AllocationTape::kNone;
  for (const auto& t : tensors) {
    const auto root = tape_.alloc(bytes(t), MemoryRole::kOptimizerTemporaries);
    const auto denom = tape_.alloc(bytes(t), MemoryRole::kOptimizerTemporaries);
    tape_.free(root);
    tape_.free(previous);
    previous = denom;
  }
  tape_.free(previous);
}

}  // namespace fragscope::plan
