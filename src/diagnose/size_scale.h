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

/// @brief The share of the paired bytes (pairs of 1 MiB and more) whose b/a ratio is none of 1, `scale` and
/// `scale`² within `tolerance` (a fraction): sizes that do not follow the pass's one scale as a constant, linear or
/// quadratic term would (attention scores grow with the length squared). Two dimensions that vary apart (a
/// translation's source and target lengths), or a fixed-size part that outweighs the one that follows the batch
/// (then `scale` is 1 and the rest at another ratio), leave a good part of the bytes at other ratios.
template <typename SizeA, typename SizeB>
double share_off_scale(const AlignedPairs& pairs, SizeA&& size_a, SizeB&& size_b, double scale, double tolerance) {
  const double within = std::log1p(tolerance);
  double off = 0, total = 0;
  for (const auto& [i, j] : pairs) {
    const std::uint64_t sa = size_a(i), sb = size_b(j);
    if (sa < kScaleMinBytes || sb < kScaleMinBytes) continue;
    const double bytes = static_cast<double>(sa + sb);
    total += bytes;
    const double ratio = std::log(static_cast<double>(sb) / static_cast<double>(sa));
    const double s = std::log(scale);
    if (std::abs(ratio) > within && std::abs(ratio - s) > within && std::abs(ratio - 2 * s) > within) off += bytes;
  }
  return total > 0 ? off / total : 0.0;
}

}  // namespace fragscope::diagnose
