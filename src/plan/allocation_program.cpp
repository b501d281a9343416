#include "plan/allocation_program.h"

#include <cassert>
#include <stdexcept>

namespace fragscope::plan {

std::string_view role_key(MemoryRole role) {
  switch (role) {
    case MemoryRole::kParameters:
      return "parameters";
    case MemoryRole::kGradients:
      return "gradients";
    case MemoryRole::kOptimizerState:
      return "optimizer_state";
    case MemoryRole::kOptimizerTemporaries:
      return "optimizer_temporaries";
    case MemoryRole::kWeightCopies:
      return "weight_copies";
    case MemoryRole::kActivations:
      return "activations";
    case MemoryRole::kKvCache:
      return "kv_cache";
    case MemoryRole::kLogitsAndLoss:
      return "logits_and_loss";
    case MemoryRole::kTransients:
      return "transients";
    case MemoryRole::kCommunication:
      return "communication_buffers";
    case MemoryRole::kWorkspaces:
      return "cublas_workspace";
    case MemoryRole::kBatch:
      return "batch";
  }
  return "?";
}

std::string_view phase_name(Phase phase) {
  switch (phase) {
    case Phase::kSetup:
      return "setup";
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kOptimizerStep:
      return "optimizer step";
    case Phase::kEval:
      return "eval";
  }
  return "?";
}

AllocationTape::Tensor AllocationTape::alloc(std::uint64_t bytes, MemoryRole role, alloc::StreamId stream) {
  const Tensor id = program_.tensors++;
  program_.events.push_back({ProgramEvent::Kind::kAlloc, role, stream, id, bytes});
  sizes_.push_back(bytes);
  live_.push_back(true);
  return id;
}

void AllocationTape::free(Tensor tensor) {
  if (tensor == kNone) return;
  // A double free is a bug in the program's construction, not in the user's input.
  if (!live_[tensor]) throw std::logic_error("allocation program frees a tensor twice");
  live_[tensor] = false;
  program_.events.push_back({ProgramEvent::Kind::kFree, MemoryRole::kTransients, 0, tensor, sizes_[tensor]});
}

void AllocationTape::retag(Tensor tensor, MemoryRole role) {
  assert(live_[tensor]);
  program_.events.push_back({ProgramEvent::Kind::kRetag, role, 0, tensor, sizes_[tensor]});
}

void AllocationTape::mark(Phase phase, std::uint32_t micro_step) {
  program_.marks.push_back({program_.events.size(), phase, micro_step});
}

}  // namespace fragscope::plan
