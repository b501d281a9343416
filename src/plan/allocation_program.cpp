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

std::string_view program_phase_name(ProgramPhase phase) {
  switch (phase) {
    case ProgramPhase::kSetup:
      return "setup";
    case ProgramPhase::kForward:
      return "forward";
    case ProgramPhase::kBackward:
      return "backward";
    case ProgramPhase::kOptimizerStep:
      return "optimizer step";
    case ProgramPhase::kEval:
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

void AllocationTape::take_written(std::vector<ProgramEvent>& events, std::vector<ProgramMark>& marks) {
  events.clear();
  marks.clear();
  events.swap(program_.events);  // the caller's buffers come back empty: no reallocation per piece
  marks.swap(program_.marks);
}

bool AllocationTape::reuse_ids_from(Tensor first) {
  for (Tensor t = first; t < program_.tensors; ++t)
    if (live_[t]) return false;
  program_.tensors = first;
  sizes_.resize(first);
  live_.resize(first);
  return true;
}

void AllocationTape::mark(ProgramPhase phase, std::uint32_t micro_step) {
  program_.marks.push_back({program_.events.size(), phase, micro_step});
}

}  // namespace fragscope::plan
