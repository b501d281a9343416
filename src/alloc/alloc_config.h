#pragma once
/// @file alloc_config.h
/// @brief The caching allocator's settings, parsed from a `PYTORCH_CUDA_ALLOC_CONF` string with
/// the same syntax and validation as PyTorch (c10/core/AllocatorConfig.cpp).
///
/// Syntax: `key:value,key:value,...`; lists in brackets (`roundup_power2_divisions:[256:1,>:4]`);
/// spaces ignored. An unknown key or a bad value is an error naming the key, as in PyTorch.

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace fragscope::alloc {

/// `max_split_size` when no limit is set (PyTorch: SIZE_MAX, exported as -1).
inline constexpr std::uint64_t kNoSplitLimit = std::numeric_limits<std::uint64_t>::max();
/// Number of power-of-two intervals of `roundup_power2_divisions`: [1 MiB, 2 MiB) ... [32 GiB, ∞).
inline constexpr std::size_t kRoundupIntervals = 16;

struct AllocConfig {
  /// Blocks this large or larger are never split; kNoSplitLimit = unlimited.
  std::uint64_t max_split_size = kNoSplitLimit;
  /// How much larger than the request an oversize cached block may be and still be reused.
  std::uint64_t max_non_split_rounding = 20ull << 20;
  /// Segment size for 1–10 MiB requests and the page of large-pool expandable segments.
  std::uint64_t large_segment_size = 20ull << 20;
  /// Divisions per interval k = [2^k MiB, 2^(k+1) MiB); 0 or 1 = plain 512-byte rounding.
  std::array<std::uint32_t, kRoundupIntervals> roundup_power2_divisions{};
  /// Fraction of the allowed memory above which cached blocks are garbage-collected
  /// (only effective with a memory fraction). 0 = off.
  double garbage_collection_threshold = 0.0;
  bool expandable_segments = false;
  /// `per_process_memory_fraction` key of the newest PyTorch; nullopt when not given.
  std::optional<double> per_process_memory_fraction;

  friend bool operator==(const AllocConfig&, const AllocConfig&) = default;
};

/// @brief Parses a `PYTORCH_CUDA_ALLOC_CONF` string; "" gives the defaults.
/// Keys without an effect on device memory placement (`release_lock_on_cudamalloc`,
/// `pinned_*`, `graph_capture_record_stream_reuse`, `backend:native`) are validated and ignored.
/// @throws InputError "PYTORCH_CUDA_ALLOC_CONF: <problem> (key '<key>')" for an unknown key, a
///         malformed value, a value out of PyTorch's range, or `backend:cudaMallocAsync` (the
///         driver's pool is not modelled).
AllocConfig parse_alloc_conf(std::string_view text);

/// @brief The canonical `PYTORCH_CUDA_ALLOC_CONF` string of `config` (only non-default keys, in
/// a fixed order); "" for the defaults. parse_alloc_conf(to_alloc_conf(c)) == c.
std::string to_alloc_conf(const AllocConfig& config);

}  // namespace fragscope::alloc
