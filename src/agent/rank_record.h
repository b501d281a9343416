#pragma once
/// @file rank_record.h
/// @brief One training rank's latest published state, as the hook writes it (docs/rank-file.md).

#include <cstdint>
#include <string>

#include "util/job_phase.h"

namespace fragscope::agent {

/// @brief A decoded rank-file payload. Field names, units and meanings follow the layout table.
struct RankRecord {
  std::int64_t pid = 0;
  std::int32_t rank = 0;
  std::int32_t local_rank = 0;
  std::int32_t world_size = 1;
  std::int32_t gpu = -1;  ///< CUDA device index, -1 unknown
  /// What the rank is doing; the hook sets it through its phase context managers.
  JobPhase phase = JobPhase::kTrain;
  bool largest_free_known = false;
  bool throughput_totals_known = false;  ///< samples_total and tokens_total were written
  std::uint64_t update_unix_ns = 0;
  std::uint64_t step_unix_ns = 0;
  std::uint64_t step = 0;
  std::uint64_t allocated_bytes = 0;
  std::uint64_t reserved_bytes = 0;
  std::uint64_t active_bytes = 0;
  std::uint64_t inactive_split_bytes = 0;
  std::uint64_t requested_bytes = 0;
  std::uint64_t largest_free_block_bytes = 0;
  std::uint64_t allocated_peak_bytes = 0;
  std::uint64_t reserved_peak_bytes = 0;
  std::uint64_t device_total_bytes = 0;
  std::uint64_t alloc_retries = 0;
  std::uint64_t ooms = 0;
  std::uint64_t segments = 0;
  std::uint64_t checkpoint_ack = 0;
  std::uint64_t batch_samples = 0;
  std::uint64_t batch_tokens = 0;
  std::uint64_t batch_longest_sequence = 0;
  std::uint64_t samples_total = 0;  ///< samples since the hook started
  std::uint64_t tokens_total = 0;   ///< tokens since the hook started
  std::int64_t loader_queue_depth = -1;  ///< -1 unknown
  double step_seconds = 0;
  double data_wait_seconds = 0;
  double h2d_seconds = 0;
  double compute_seconds = 0;
  double data_wait_ratio = 0;
  double samples_per_second = 0;
  double step_seconds_total = 0;
  double data_wait_seconds_total = 0;
  double hook_seconds_total = 0;
  std::string job;
  std::string gpu_uuid;  ///< "GPU-…", empty when unknown

  /// @brief Stranded memory in split segments relative to what is reserved:
  /// inactive_split_bytes / reserved_bytes, 0 when nothing is reserved.
  double fragmentation_ratio() const;
};

}  // namespace fragscope::agent
