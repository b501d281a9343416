#pragma once
/// @file sequence_alignment.h
/// @brief A longest common subsequence of two sequences (Myers' O((N+M)·D) difference
/// algorithm): which allocations of one step are the same statements as which of another.
/// Thread-safety: a pure function.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace fragscope::diagnose {

using AlignedPairs = std::vector<std::pair<std::uint32_t, std::uint32_t>>;

/// @brief Index pairs (i, j), 0 ≤ i < n, 0 ≤ j < m, with same(i, j), of a longest common
/// subsequence, in order; nullopt when more than `max_edits` insertions and deletions separate
/// the two. `same` must be an equivalence between the two sequences' elements.
template <typename Same>
std::optional<AlignedPairs> align_sequences(std::size_t n, std::size_t m, Same&& same, std::size_t max_edits) {
  const auto sn = static_cast<std::int64_t>(n);
  const auto sm = static_cast<std::int64_t>(m);
  const std::int64_t limit = std::min<std::int64_t>(sn + sm, static_cast<std::int64_t>(max_edits));
  // rounds[d][k + d]: the furthest x on diagonal k (x - y = k) after d edits.
  std::vector<std::vector<std::int64_t>> rounds;
  std::vector<std::int64_t> v(2 * static_cast<std::size_t>(limit) + 3, 0);
  const std::int64_t offset = limit + 1;
  std::int64_t found = -1;
  for (std::int64_t d = 0; d <= limit && found < 0; ++d) {
    for (std::int64_t k = -d; k <= d; k += 2) {
      const bool down = k == -d || (k != d && v[offset + k - 1] < v[offset + k + 1]);
      std::int64_t x = down ? v[offset + k + 1] : v[offset + k - 1] + 1;
      std::int64_t y = x - k;
      while (x < sn && y < sm && same(static_cast<std::size_t>(x), static_cast<std::size_t>(y))) ++x, ++y;
      v[offset + k] = x;
      if (x >= sn && y >= sm) found = d;
    }
    rounds.emplace_back(v.begin() + (offset - d), v.begin() + (offset + d + 1));
  }
  if (found < 0) return std::nullopt;
  AlignedPairs pairs;
  std::int64_t x = sn, y = sm;
  const auto snake_back_to = [&](std::int64_t sx, std::int64_t sy) {
    while (x > sx && y > sy) {
      --x, --y;
      pairs.emplace_back(static_cast<std::uint32_t>(x), static_cast<std::uint32_t>(y));
    }
  };
  for (std::int64_t d = found; d > 0; --d) {
    const std::vector<std::int64_t>& previous = rounds[static_cast<std::size_t>(d - 1)];  // k in [-(d-1), d-1]
    const auto at = [&](std::int64_t k) { return previous[static_cast<std::size_t>(k + d - 1)]; };
    const std::int64_t k = x - y;
    const bool down = k == -d || (k != d && at(k - 1) < at(k + 1));
    const std::int64_t from_k = down ? k + 1 : k - 1;
    const std::int64_t from_x = at(from_k);
    const std::int64_t start_x = down ? from_x : from_x + 1;
    snake_back_to(start_x, start_x - k);
    x = from_x;
    y = from_x - from_k;
  }
  snake_back_to(0, 0);
  std::reverse(pairs.begin(), pairs.end());
  return pairs;
}

}  // namespace fragscope::diagnose
