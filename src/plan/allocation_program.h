#pragma once
/// @file allocation_program.h
/// @brief A training run as the caching allocator sees it: every tensor's malloc and free, in
/// order, each labelled with what it holds, and marks saying which phase of which micro-step
/// the events belong to. training_program.h builds one from a job spec; reserved_model.h
/// replays it through the caching-allocator model.
///
/// Invariants: a tensor is allocated once and freed at most once, after its allocation;
/// a retag changes only the label of a live tensor (the allocator does not see it); marks are
/// in event order. Tensors still live at the end are simply never freed.
/// Thread-safety: a plain value; AllocationTape is single-threaded.

#include <cstdint>
#include <string_view>
#include <vector>

#include "alloc/allocator_model.h"

namespace fragscope::plan {

/// @brief What a tensor holds: the breakdown's rows (docs/plan.md explains each).
enum class MemoryRole : std::uint8_t {
  kParameters,
  kGradients,
  kOptimizerState,
  kOptimizerTemporaries,
  kWeightCopies,  ///< autocast's low-precision weight casts, FSDP's gathered parameters
  kActivations,   ///< tensors autograd keeps for the backward, checkpointed block inputs
  kKvCache,
  kLogitsAndLoss,
  kTransients,     ///< intermediates of one op or one backward node
  kCommunication,  ///< DDP buckets, FSDP reduce-scatter buffers
  kWorkspaces,     ///< cuBLAS handles' workspaces
  kBatch,          ///< input ids, labels, position tables
};
inline constexpr int kMemoryRoles = 12;

/// @brief The breakdown key of a role ("activations", "optimizer_state", …).
std::string_view role_key(MemoryRole role);

/// @brief Where in the run an event falls: finer than the job's phase (util/job_phase.h), whose
/// train phase the forward and backward make up, its optimizer phase the optimizer step.
enum class ProgramPhase : std::uint8_t { kSetup, kForward, kBackward, kOptimizerStep, kEval };
/// @brief "setup", "forward", "backward", "optimizer step", "eval" (plan's text and JSON).
std::string_view program_phase_name(ProgramPhase phase);

struct ProgramEvent {
  enum class Kind : std::uint8_t { kAlloc, kFree, kRetag };
  Kind kind = Kind::kAlloc;
  MemoryRole role = MemoryRole::kTransients;  ///< kAlloc, kRetag: the (new) label
  alloc::StreamId stream = 0;
  std::uint32_t tensor = 0;
  std::uint64_t bytes = 0;  ///< kAlloc: the requested size
};

/// @brief From `event` on, the events belong to `phase` of micro-step `micro_step` (0-based;
/// an optimizer step carries the micro-step that triggered it, an eval the last micro-step).
struct ProgramMark {
  std::size_t event = 0;
  ProgramPhase phase = ProgramPhase::kSetup;
  std::uint32_t micro_step = 0;
};

struct AllocationProgram {
  std::vector<ProgramEvent> events;
  std::vector<ProgramMark> marks;
  std::uint32_t tensors = 0;  ///< tensor ids are 0 … tensors − 1
  /// What one decoder block keeps for its backward (its saved tensors and output), at the
  /// longest micro-step: for people, not for the replay.
  std::uint64_t block_activation_bytes = 0;
};

/// @brief Builds a program: tensors are handles; the tape checks the invariants above.
class AllocationTape {
 public:
  using Tensor = std::uint32_t;
  static constexpr Tensor kNone = 0xffffffffu;

  Tensor alloc(std::uint64_t bytes, MemoryRole role, alloc::StreamId stream = 0);
  /// @brief Frees `tensor`; kNone is ignored (an optional tensor that does not exist).
  void free(Tensor tensor);
  void retag(Tensor tensor, MemoryRole role);
  void mark(ProgramPhase phase, std::uint32_t micro_step);
  std::uint64_t bytes(Tensor tensor) const { return sizes_[tensor]; }
  bool live(Tensor tensor) const { return tensor != kNone && live_[tensor]; }

  AllocationProgram take() { return std::move(program_); }
  /// @brief Moves the events and marks written so far into `events` and `marks` (marks index into
  /// them) and forgets them; tensor ids go on. A replay takes a program this way as it is written.
  void take_written(std::vector<ProgramEvent>& events, std::vector<ProgramMark>& marks);
  /// @brief The id the next tensor gets.
  Tensor next_tensor() const { return program_.tensors; }
  /// @brief Gives the ids from `first` on out again if none of those tensors is live, so a replay
  /// taking the program piece by piece holds one piece's tensors, not the run's. REQUIRES: their
  /// events were taken, and the writer never refers to a freed tensor again (it sets a handle
  /// anew before using it). @return whether it did.
  bool reuse_ids_from(Tensor first);

 private:
  AllocationProgram program_;
  std::vector<std::uint64_t> sizes_;
  std::vector<bool> live_;
};

}  // namespace fragscope::plan
