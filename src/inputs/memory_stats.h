#pragma once
/// @file memory_stats.h
/// @brief `torch.cuda.memory_stats()` as a typed record: the counters the doctor reads, by name,
/// plus every key as PyTorch spelled it.
///
/// PyTorch keeps four counters per statistic (`current`, `peak`, `allocated` = total added,
/// `freed` = total removed) and splits most statistics by pool (`all`, `small_pool`,
/// `large_pool`). Keys are flat, dotted: "reserved_bytes.large_pool.peak".
/// Invariant: every typed field equals `values.at(its key)` when that key is present, and 0
/// (or nullopt) when it is absent. Thread-safety: a plain value; share it read-only.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace fragscope::inputs {

/// @brief The four counters PyTorch keeps for one statistic.
struct StatCounters {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  std::int64_t allocated = 0;  ///< total ever added
  std::int64_t freed = 0;      ///< total ever removed
};

/// @brief One statistic, overall and per pool (small pool: blocks ≤ 1 MiB).
struct PoolStat {
  StatCounters all;
  StatCounters small_pool;
  StatCounters large_pool;
};

struct MemoryStats {
  // Bytes.
  PoolStat allocated_bytes;       ///< handed out to tensors (rounded sizes)
  PoolStat reserved_bytes;        ///< held from the driver in segments
  PoolStat active_bytes;          ///< allocated + freed-but-pending (record_stream)
  PoolStat inactive_split_bytes;  ///< free parts of partly used segments ("non-releasable")
  PoolStat requested_bytes;       ///< what callers asked for, before rounding
  // Counts.
  PoolStat allocation;
  PoolStat active;
  PoolStat inactive_split;
  PoolStat segment;
  StatCounters oversize_allocations;  ///< requests above max_split_size
  StatCounters oversize_segments;
  std::int64_t num_alloc_retries = 0;  ///< cudaMalloc failures answered by freeing the cache
  std::int64_t num_ooms = 0;
  std::int64_t num_sync_all_streams = 0;
  std::int64_t num_device_alloc = 0;  ///< cudaMalloc / cuMemMap calls
  std::int64_t num_device_free = 0;
  /// Bytes; nullopt when absent or -1 (PyTorch's "unlimited").
  std::optional<std::int64_t> max_split_size;

  /// Every key read, flat and dotted as PyTorch names it, including the typed ones above.
  std::map<std::string, std::int64_t, std::less<>> values;

  /// @brief The value of `key` ("segment.all.current"), or nullopt when it was not read.
  std::optional<std::int64_t> get(std::string_view key) const;
};

/// @brief Fills the typed fields from flat dotted keys; unknown keys stay in `values` only.
MemoryStats memory_stats_from_values(std::map<std::string, std::int64_t, std::less<>> values);

}  // namespace fragscope::inputs
