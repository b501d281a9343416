#pragma once
/// @file reserved_model.h
/// @brief Replays an allocation program through the caching-allocator model (the same model
/// that replays recorded traces, src/alloc/caching_allocator.h) under a PYTORCH_CUDA_ALLOC_CONF,
/// so the peak reserved bytes, the fragmentation at that peak and the allocator's retries come
/// from PyTorch's own rules: 512-byte rounding, the small (≤ 1 MiB, 2 MiB segments) and large
/// pools (20 MiB segments below 10 MiB, 2 MiB-rounded above), best fit, splitting, caching
/// across steps, per-stream pools, and the release-and-retry path when cudaMalloc fails.
///
/// Allocated bytes are the model's (rounded) block sizes, as torch.cuda.max_memory_allocated()
/// counts them; the breakdown at the allocated peak is in requested bytes per role.
/// A program can be replayed whole (replay_program) or piece by piece as it is written
/// (ProgramReplay; training_replay.h passes over micro-steps that would change nothing).
/// Thread-safety: pure function of its arguments; one ProgramReplay per thread.

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "alloc/alloc_config.h"
#include "plan/allocation_program.h"

namespace fragscope::plan {

/// @brief Where in the program something happened.
struct ProgramMoment {
  ProgramPhase phase = ProgramPhase::kSetup;
  std::uint32_t micro_step = 0;
};

/// @brief max_memory_reserved() rose to `bytes` by the end of micro-step `micro_step` (its
/// optimizer step and eval included) and stays there until the next rise.
struct ReservedRise {
  std::uint32_t micro_step = 0;
  std::uint64_t bytes = 0;
};

struct ReplayedRun {
  std::uint64_t peak_reserved_bytes = 0;   ///< max_memory_reserved()
  std::uint64_t peak_allocated_bytes = 0;  ///< max_memory_allocated()
  ProgramMoment peak_reserved_at;
  ProgramMoment peak_allocated_at;
  /// reserved − allocated at the reserved peak: cached free blocks (fragmentation and cache).
  std::uint64_t unallocated_at_peak_bytes = 0;
  /// Requested bytes per MemoryRole at the allocated peak (sums to the live requested bytes).
  std::array<std::uint64_t, kMemoryRoles> breakdown{};
  std::uint64_t num_alloc_retries = 0;  ///< mallocs that freed the cache and retried
  bool oom = false;                     ///< a malloc failed: the run would die
  ProgramMoment oom_at;
  std::uint64_t oom_request_bytes = 0;
  /// What torch.cuda.memory_stats() shows after each micro-step, where it changed (one entry per
  /// rise, not per micro-step: a plan may run millions).
  std::vector<ReservedRise> reserved_rises;
};

/// @brief Replays a program in pieces: the events a tape wrote since the last piece, with the
/// marks among them. Tensor ids are the tape's, shared by all pieces.
class ProgramReplay {
 public:
  /// @param capacity bytes the process may reserve (nullopt: unlimited) on a device of
  /// `device_total_bytes`.
  ProgramReplay(const alloc::AllocConfig& config, std::optional<std::uint64_t> capacity,
                std::uint64_t device_total_bytes);
  ~ProgramReplay();
  ProgramReplay(const ProgramReplay&) = delete;
  ProgramReplay& operator=(const ProgramReplay&) = delete;

  /// @brief Replays `events`; `marks` index into them. @return false once a malloc failed (the
  /// run stops there: later pieces are not replayed).
  bool replay(std::span<const ProgramEvent> events, std::span<const ProgramMark> marks);
  /// @brief The allocator model's state (CachingAllocator::state) with each live block labelled by
  /// its tensor's role and order among the live tensors (not its id: a later optimizer step's
  /// .grad tensors are new ones in the old ones' places): from equal states, equal pieces (up to
  /// the ids) replay alike and end in equal states.
  std::vector<std::uint64_t> state() const;
  /// @brief Counts the retries of pieces that were passed over instead of replayed.
  void add_alloc_retries(std::uint64_t retries);
  const ReplayedRun& run() const { return run_; }

 private:
  struct Model;
  std::unique_ptr<Model> model_;
  ReplayedRun run_;
};

/// @brief Replays `program` whole on a device of `device_total_bytes` whose process may reserve
/// at most `capacity` bytes (nullopt: unlimited). Stops at the first OOM.
ReplayedRun replay_program(const AllocationProgram& program, const alloc::AllocConfig& config,
                           std::optional<std::uint64_t> capacity, std::uint64_t device_total_bytes);

}  // namespace fragscope::plan
