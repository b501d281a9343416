#include "diagnose/unit_alignment.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "diagnose/size_scale.h"

namespace fragscope::diagnose {
namespace {

using Pairs = AlignedPairs;

constexpr std::size_t kMaxEdits = 1500;  // insertions + deletions two units may differ by

/// Ratio of b's sizes to a's over matched allocations (size_scale.h).
double size_scale(std::span<const snapshot::TraceEvent> trace, const std::vector<std::size_t>& a,
                  const std::vector<std::size_t>& b, const Pairs& pairs) {
  return diagnose::size_scale(
      pairs, [&](std::size_t i) { return trace[a[i]].size; }, [&](std::size_t j) { return trace[b[j]].size; });
}

/// True when two sizes can be the same allocation in units whose sizes differ by `scale`:
/// equal, or in the ratio scale or scale² (within 1%); small ones always (rounding).
bool compatible_sizes(std::uint64_t a, std::uint64_t b, double scale) {
  if (std::max(a, b) < kScaleMinBytes) return true;
  if (a == 0 || b == 0) return false;
  const double r = std::log(static_cast<double>(b) / static_cast<double>(a));
  const double s = std::log(scale);
  return std::abs(r) < 0.01 || std::abs(r - s) < 0.01 || std::abs(r - 2 * s) < 0.01;
}

/// Pairs allocations the call-stack alignment left single at one position: a gap of one allocation in each unit
/// between two pairs (or after the last pair, the failing unit's last), of compatible sizes ≥ kScaleMinBytes. A
/// statement run through another code path in one of them, the same allocation: cuDNN's convolution workspaces
/// come from `try_configs` while a step builds its plans and from the plan cache after, so a run's first step and
/// a later one differ there alone (field mta_edge: 15% of the failing prefix's bytes).
void pair_substitutions(std::span<const snapshot::TraceEvent> trace, const std::vector<std::size_t>& a, std::size_t na,
                        const std::vector<std::size_t>& b, std::size_t nb, double scale, Pairs& pairs) {
  if (pairs.empty()) return;
  const auto same = [&](std::size_t i, std::size_t j) {
    const std::uint64_t sa = trace[a[i]].size, sb = trace[b[j]].size;
    return std::min(sa, sb) >= kScaleMinBytes && compatible_sizes(sa, sb, scale);
  };
  Pairs out;
  out.reserve(pairs.size());
  for (std::size_t k = 0; k < pairs.size(); ++k) {
    out.push_back(pairs[k]);
    const std::size_t i = pairs[k].first + 1, j = pairs[k].second + 1;
    if (k + 1 < pairs.size()) {
      if (pairs[k + 1].first == i + 1 && pairs[k + 1].second == j + 1 && same(i, j))
        out.emplace_back(static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j));
    } else if (j + 1 == nb && i < na && same(i, j)) {
      out.emplace_back(static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j));
    }
  }
  pairs = std::move(out);
}

}  // namespace

std::optional<AlignedPairs> align_units(std::span<const snapshot::TraceEvent> trace, const std::vector<std::size_t>& a,
                                        const std::vector<std::uint32_t>& a_stacks, std::size_t na,
                                        const std::vector<std::size_t>& b, const std::vector<std::uint32_t>& b_stacks,
                                        std::size_t nb, double& scale) {
  std::vector<std::size_t> framed_a, framed_b;  // positions of allocations with frames
  for (std::size_t i = 0; i < na; ++i)
    if (a_stacks[i] != 0) framed_a.push_back(i);
  for (std::size_t j = 0; j < nb; ++j)
    if (b_stacks[j] != 0) framed_b.push_back(j);
  if (framed_a.size() == na && framed_b.size() == nb) {
    auto pairs = align_sequences(
        na, nb, [&](std::size_t i, std::size_t j) { return a_stacks[i] == b_stacks[j]; }, kMaxEdits);
    if (pairs) {
      scale = size_scale(trace, a, b, *pairs);
      pair_substitutions(trace, a, na, b, nb, scale, *pairs);
    }
    return pairs;
  }
  const auto framed = align_sequences(
      framed_a.size(), framed_b.size(),
      [&](std::size_t i, std::size_t j) { return a_stacks[framed_a[i]] == b_stacks[framed_b[j]]; }, kMaxEdits);
  if (!framed || framed->empty()) return std::nullopt;
  Pairs positions;
  for (const auto& [i, j] : *framed)
    positions.emplace_back(static_cast<std::uint32_t>(framed_a[i]), static_cast<std::uint32_t>(framed_b[j]));
  scale = size_scale(trace, a, b, positions);
  auto pairs = align_sequences(
      na, nb,
      [&](std::size_t i, std::size_t j) {
        return a_stacks[i] == b_stacks[j] &&
               (a_stacks[i] != 0 || compatible_sizes(trace[a[i]].size, trace[b[j]].size, scale));
      },
      kMaxEdits);
  if (pairs) pair_substitutions(trace, a, na, b, nb, scale, *pairs);
  return pairs;
}

std::optional<AlignedPairs> align_cut_unit(std::span<const snapshot::TraceEvent> trace,
                                           const std::vector<std::size_t>& a_allocs,
                                           const std::vector<std::uint32_t>& a_stacks_all, std::size_t window,
                                           const std::vector<std::size_t>& b_allocs,
                                           const std::vector<std::uint32_t>& b_stacks_all, double& scale) {
  const std::size_t n = b_allocs.size();
  std::vector<std::size_t> b(b_allocs.rbegin(), b_allocs.rend());
  std::vector<std::uint32_t> b_stacks(b_stacks_all.rbegin(), b_stacks_all.rend());
  std::optional<Pairs> best;
  std::uint64_t best_bytes = 0;
  for (std::size_t c = std::min(window, a_allocs.size()); c-- > 0;) {
    if (a_stacks_all[c] != b_stacks_all.back()) continue;
    std::vector<std::size_t> a(a_allocs.rend() - static_cast<std::ptrdiff_t>(c + 1), a_allocs.rend());
    std::vector<std::uint32_t> a_stacks(a_stacks_all.rend() - static_cast<std::ptrdiff_t>(c + 1), a_stacks_all.rend());
    double s = 1.0;
    const auto reversed = align_units(trace, a, a_stacks, a.size(), b, b_stacks, n, s);
    if (!reversed || reversed->empty() || reversed->front() != std::pair<std::uint32_t, std::uint32_t>{0, 0}) continue;
    std::uint64_t bytes = 0;
    Pairs pairs;
    for (auto it = reversed->rbegin(); it != reversed->rend(); ++it) {
      pairs.emplace_back(static_cast<std::uint32_t>(c - it->first), static_cast<std::uint32_t>(n - 1 - it->second));
      bytes += trace[b_allocs[pairs.back().second]].size;
    }
    if (!best || bytes > best_bytes) {
      best = std::move(pairs);
      best_bytes = bytes;
      scale = s;
    }
  }
  return best;
}

}  // namespace fragscope::diagnose
