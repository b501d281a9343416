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
/// Thread-safety: pure function of its arguments.

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "alloc/alloc_config.h"
#include "plan/allocation_program.h"

namespace fragscope::plan {

/// @brief Where in the program something happened.
struct ProgramMoment {
  Phase phase = Phase::kSetup;
  std::uint32_t micro_step = 0;
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
  std::vector<std::uint64_t> micro_step_peak_allocated;  ///< per micro-step (optimizer step included)
  std::vector<std::uint64_t> micro_step_peak_reserved;
};

/// @brief Replays `program` on a device of `device_total_bytes` whose process may reserve at
/// most `capacity` bytes (nullopt: unlimited). Stops at the first OOM.
ReplayedRun replay_program(const AllocationProgram& program, const alloc::AllocConfig& config,
                           std::optional<std::uint64_t> capacity, std::uint64_t device_total_bytes);

}  // namespace fragscope::plan
