#pragma once
/// @file memory_model.h
/// @brief Per-GPU memory of a training job: its allocation program (training_program.h)
/// replayed through the caching-allocator model (training_replay.h), set against the device.
///
/// Peak allocated, the fragmentation at the reserved peak and the breakdown come from the
/// replay without a memory limit (what the job needs). When that replay reserves more than the
/// device's usable memory (device − CUDA context − NCCL buffers), a second replay limited to it,
/// as the real allocator is, says whether the job still fits by freeing cached blocks (and how
/// many mallocs had to flush the whole cache and retry) or runs out; its peak reserved is then
/// what the device would show.
/// Thread-safety: pure functions of their arguments.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "plan/job_spec.h"
#include "plan/reserved_model.h"
#include "plan/training_schedule.h"

namespace fragscope::plan {

/// @brief The canary's HBM criterion (docs/criteria.md: reserved_bytes.all.peak / device memory):
/// a recommended configuration must stay under it, not merely fit.
inline constexpr double kMaxHbmFraction = 0.90;

/// @brief One named part of the live memory ("activations", "optimizer_state", …).
struct MemoryItem {
  std::string_view key;
  std::uint64_t bytes = 0;
};

struct MemoryEstimate {
  std::uint64_t parameters = 0;            ///< model parameter count
  std::uint64_t peak_allocated_bytes = 0;  ///< torch.cuda.max_memory_allocated()
  std::uint64_t peak_reserved_bytes = 0;   ///< torch.cuda.max_memory_reserved() on the device
  /// What the cache grows to without a memory limit (= peak_reserved_bytes when it fits in the
  /// usable memory).
  std::uint64_t unconstrained_reserved_bytes = 0;
  ProgramMoment peak_allocated_at;
  ProgramMoment peak_reserved_at;
  std::uint64_t unallocated_at_peak_bytes = 0;  ///< cached but unallocated at the reserved peak
  /// What is live at the allocated peak (requested bytes per role, largest first), then
  /// "allocator_rounding": the peak allocated minus their sum.
  std::vector<MemoryItem> breakdown;
  std::uint64_t block_activation_bytes = 0;  ///< what one block keeps for its backward
  std::uint64_t micro_steps = 0;             ///< replayed
  std::uint64_t optimizer_steps = 0;
  std::uint64_t eval_passes = 0;
  std::uint64_t longest_seq_len = 0;  ///< of the replayed micro-steps
  /// Variable lengths: the lowest and highest peak reserved over the length draws (the
  /// estimate is the highest's); both equal for fixed lengths.
  std::uint64_t draws = 1;
  std::uint64_t lowest_draw_reserved_bytes = 0;

  std::uint64_t cuda_context_bytes = 0;   ///< driver reserve + CUDA context (outside PyTorch)
  std::uint64_t communication_bytes = 0;  ///< NCCL buffers (outside PyTorch)
  std::uint64_t device_bytes = 0;         ///< the card's (or MIG slice's) memory
  std::uint64_t usable_bytes = 0;         ///< device − context − communication
  /// Within the usable memory: mallocs that had to free the cache and retry (slow steps).
  std::uint64_t num_alloc_retries = 0;
  /// The cache would outgrow the usable memory: the allocator frees cached blocks to fit.
  bool cache_trimmed = false;
  bool fits = false;     ///< the replay within the usable memory never ran out
  ProgramMoment oom_at;  ///< where it ran out when it does not fit
  std::uint64_t oom_request_bytes = 0;
  /// fits, no retries, and peak reserved ≤ kMaxHbmFraction × device: what the canary accepts.
  bool within_hbm_limit = false;
  /// usable − peak reserved when it fits; usable − unconstrained reserved (negative) when not.
  std::int64_t margin_bytes = 0;

  double hbm_fraction() const { return static_cast<double>(peak_reserved_bytes) / static_cast<double>(device_bytes); }
  std::uint64_t item(std::string_view key) const;
};

/// @brief The job's planning schedules (training_program.h) replayed, in parallel; the one that
/// reserves the most is the estimate. REQUIRES: validate(spec).
MemoryEstimate estimate_memory(const JobSpec& spec);
/// @brief The same for one given schedule (a recorded run's micro-steps).
MemoryEstimate estimate_memory(const JobSpec& spec, const TrainingSchedule& schedule);

/// @brief "89.5%": one decimal, or more when one decimal would put a fraction on the other side
/// of (or on) `limit` or 100% than it is, so a printed figure never contradicts a verdict.
std::string percent_text(double fraction, double limit = kMaxHbmFraction);

/// @brief "forward of micro-step 3", "optimizer step after micro-step 5", "eval after …".
std::string moment_text(const ProgramMoment& moment);

}  // namespace fragscope::plan
