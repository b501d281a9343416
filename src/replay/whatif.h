#pragma once
/// @file whatif.h
/// @brief The same trace under many allocator configs, in parallel: which config needs the
/// least memory, which survive the device, and the smallest device each one survives on.
///
/// Each config is replayed twice from the one PreparedTrace: without a memory limit (its
/// demand: peak reserved) and at the resolved capacity (does it OOM there). With min-capacity,
/// the smallest capacity at which the trace survives is found by bisection between the ideal
/// packer's peak (nothing can do with less) and the config's unlimited peak, in 2 MiB steps
/// (every cudaMalloc and page is a multiple of 2 MiB). "Survives" means: no OOM until the end
/// of the trace, or until the point where the recorded run died.
/// Thread-safety: run_whatif runs replays on a pool of threads over the read-only trace, as many
/// at once as the memory budget of replay_memory.h holds.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "alloc/alloc_config.h"
#include "replay/capacity.h"
#include "replay/prepared_trace.h"
#include "replay/replay_engine.h"
#include "replay/replay_memory.h"
#include "util/progress.h"

namespace fragscope::replay {

struct WhatIfConfig {
  std::string conf;  ///< PYTORCH_CUDA_ALLOC_CONF string ("" = PyTorch's defaults)
  alloc::AllocConfig config;
  bool recorded = false;  ///< the config the trace was recorded under
};

/// @brief The standard sweep: the recorded config, PyTorch's defaults, expandable segments,
/// max_split_size_mb 64–1024, roundup_power2_divisions 2–16, garbage_collection_threshold
/// (only when a memory fraction caps the device) and the useful combinations.
std::vector<WhatIfConfig> standard_sweep(const PreparedTrace& trace, bool fraction_known);

struct WhatIfRow {
  WhatIfConfig config;
  ReplayResult unlimited;                  ///< demand without a memory limit
  std::optional<ReplayResult> at_capacity; ///< at the resolved capacity (when there is one)
  std::optional<std::uint64_t> min_capacity;  ///< smallest surviving capacity (when asked)
  /// Fits the capacity: no OOM there (or no capacity at all).
  bool fits() const { return !at_capacity || !at_capacity->oom; }
  /// At the capacity: served the malloc the recorded run failed (or never ran out).
  bool passes_oom_point() const { return at_capacity && (at_capacity->passed_recorded_oom || !at_capacity->oom); }
};

struct WhatIfReport {
  std::vector<WhatIfRow> rows;  ///< sorted by unlimited peak reserved, ascending
  ReplayResult ideal;           ///< the ideal packer (the floor)
  Capacity capacity;
  std::optional<std::size_t> recommended;  ///< index into rows: the least memory that fits
  ReplayConcurrency concurrency;  ///< threads used, and whether the memory budget limited them
};

struct WhatIfOptions {
  bool min_capacity = false;
  unsigned threads = 0;  ///< 0 = std::thread::hardware_concurrency()
  bool use_recorded_addresses = true;
  /// Hears of two tasks counted in trace events: the replays without a limit, then those at the
  /// capacity and the bisections (the replays a bisection can take at most; it adds those it
  /// did not need when it ends).
  Progress progress;
};

/// @brief Replays `trace` under every config of `configs`.
WhatIfReport run_whatif(const PreparedTrace& trace, const std::vector<WhatIfConfig>& configs,
                        const Capacity& capacity, const WhatIfOptions& options);

/// @brief A config a user asks for (`PYTORCH_CUDA_ALLOC_CONF` syntax), labelled with its
/// normalised spelling (alloc::to_alloc_conf).
/// @throws InputError when PyTorch would reject `conf`.
WhatIfConfig user_config(const std::string& conf);

/// @brief The standard sweep of `trace` (with garbage_collection_threshold when the capacity
/// is a memory fraction), then each of `extra` the sweep does not hold already, replayed at
/// `capacity`: what `whatif` and the doctor both run.
WhatIfReport sweep_at_capacity(const PreparedTrace& trace, const Capacity& capacity, const WhatIfOptions& options,
                               std::vector<WhatIfConfig> extra = {});

/// @brief Smallest capacity (multiple of 2 MiB) at which `config` survives the trace.
/// `base.progress` counts max_bisection_replays(floor, ceiling) replays of the trace.
std::uint64_t find_min_capacity(const PreparedTrace& trace, ModelKind kind,
                                const alloc::AllocConfig& config, const ReplayOptions& base,
                                std::uint64_t floor, std::uint64_t ceiling);

/// @brief The most replays find_min_capacity(…, floor, ceiling) runs.
std::uint64_t max_bisection_replays(std::uint64_t floor, std::uint64_t ceiling);

}  // namespace fragscope::replay
