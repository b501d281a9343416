#pragma once
/// @file size_scale.h
/// @brief How much larger one pass's allocations are than another's, over the allocations an
/// alignment paired (sequence_alignment.h): the sequence length, batch or image area between them.
///
/// The ratio most common by bytes, in 1%-wide bins of its logarithm, averaged within its bin;
/// pairs below 1 MiB are left out (their sizes are rounding, not the batch). 1 when no pair is
/// large enough.
/// Thread-safety: a pure function.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>

#include "diagnose/sequence_alignment.h"

namespace fragscope::diagnose {

/// Allocations below this tell nothing of a pass's size.
inline constexpr std::uint64_t kScaleMinBytes = 1ull << 20;

/// @brief b's sizes over a's. `size_a(i)` / `size_b(j)` give the sizes of the paired (i, j).
template <typename SizeA, typename SizeB>
double size_scale(const AlignedPairs& pairs, SizeA&& size_a, SizeB&& size_b) {
  std::map<long, double> weight;
  for (const auto& [i, j] : pairs) {
    const std::uint64_t sa = size_a(i), sb = size_b(j);
    if (sa < kScaleMinBytes || sb < kScaleMinBytes) continue;
    weight[std::lround(std::log(static_cast<double>(sb) / static_cast<double>(sa)) / 0.01)] +=
        static_cast<double>(sa + sb);
  }
  if (weight.empty()) return 1.0;
  const auto mode =
      std::max_element(weight.begin(), weight.end(), [](const auto& x, const auto& y) { return x.second < y.second; });
  double sum = 0, total = 0;
  for (const auto& [i, j] : pairs) {
    const std::uint64_t sa = size_a(i), sb = size_b(j);
    if (sa < kScaleMinBytes || sb < kScaleMinBytes) continue;
    const double r = std::log(static_cast<double>(sb) / static_cast<double>(sa));
    if (std::abs(r / 0.01 - static_cast<double>(mode->first)) > 1.5) continue;
    sum += r * static_cast<double>(sa + sb);
    total += static_cast<double>(sa + sb);
  }
  return std::exp(sum / total);
}

/// @brief The share of the paired bytes (pairs of 1 MiB and more) whose b/a ratio is off `scale` by more than
/// `tolerance` (a fraction): a pass of two parts, one of fixed size (an encoder's input of fixed length) and one
/// that follows the batch (a decoder's text), has one scale by bytes and another for a good part of them.
template <typename SizeA, typename SizeB>
double share_off_scale(const AlignedPairs& pairs, SizeA&& size_a, SizeB&& size_b, double scale, double tolerance) {
  double off = 0, total = 0;
  for (const auto& [i, j] : pairs) {
    const std::uint64_t sa = size_a(i), sb = size_b(j);
    if (sa < kScaleMinBytes || sb < kScaleMinBytes) continue;
    const double bytes = static_cast<double>(sa + sb);
    total += bytes;
    if (std::abs(std::log(static_cast<double>(sb) / static_cast<double>(sa) / scale)) > std::log1p(tolerance))
      off += bytes;
  }
  return total > 0 ? off / total : 0.0;
}

}  // namespace fragscope::diagnose
