#pragma once
/// @file size_rules.h
/// @brief PyTorch's size arithmetic (CUDACachingAllocator.cpp): request rounding, pool choice
/// and the size of a new segment. Pure functions of the request and the config.

#include <algorithm>
#include <bit>
#include <cstdint>

#include "alloc/alloc_config.h"

namespace fragscope::alloc {

inline constexpr std::uint64_t kMinBlockSize = 512;        ///< every block is a multiple of this
inline constexpr std::uint64_t kSmallSize = 1ull << 20;    ///< rounded size ≤ this → small pool
inline constexpr std::uint64_t kSmallBuffer = 2ull << 20;  ///< small-pool segment / page
inline constexpr std::uint64_t kMinLargeAlloc = 10ull << 20;  ///< below: a large_segment_size segment
inline constexpr std::uint64_t kRoundLarge = 2ull << 20;      ///< larger segments round up to this

enum class PoolKind : std::uint8_t { kSmall = 0, kLarge = 1 };

/// @brief `roundup_power2_next_division(size, divisions)`. REQUIRES: divisions ≥ 2.
std::uint64_t roundup_power2_next_division(std::uint64_t size, std::uint64_t divisions);

/// @brief `round_size`: 512-byte rounding, or the next power-of-two division when
/// `roundup_power2_divisions` applies to the size's interval. Inline: called on every malloc.
inline std::uint64_t round_size(std::uint64_t size, const AllocConfig& config) {
  if (size < kMinBlockSize) return kMinBlockSize;
  // Interval k = [2^k MiB, 2^(k+1) MiB); sizes below 1 MiB use interval 0, above 32 GiB the last.
  const int log2 = static_cast<int>(std::bit_width(size)) - 1;
  const int index = std::clamp(log2 - 20, 0, static_cast<int>(kRoundupIntervals) - 1);
  const std::uint64_t divisions = config.roundup_power2_divisions[static_cast<std::size_t>(index)];
  if (divisions > 1 && size > kMinBlockSize * divisions) {
    return roundup_power2_next_division(size, divisions);
  }
  return (size + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

/// @brief The pool a rounded size is served from.
constexpr PoolKind pool_of(std::uint64_t rounded) {
  return rounded <= kSmallSize ? PoolKind::kSmall : PoolKind::kLarge;
}

/// @brief `get_allocation_size`: the cudaMalloc size when no cached block fits a rounded size.
constexpr std::uint64_t allocation_size(std::uint64_t rounded, const AllocConfig& config) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return config.large_segment_size;
  return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

}  // namespace fragscope::alloc
