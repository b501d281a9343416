#include "util/quantiles.h"

#include <algorithm>
#include <cmath>

namespace fragscope {

std::optional<double> quantile(std::vector<double> values, double q) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(q, 0.0, 1.0) * static_cast<double>(values.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(rank));
  const auto above = std::min(below + 1, values.size() - 1);
  return values[below] + (values[above] - values[below]) * (rank - static_cast<double>(below));
}

std::optional<double> relative_spread(const std::vector<double>& values) {
  const auto median = quantile(values, 0.5);
  if (!median || !(*median > 0)) return std::nullopt;
  return (*quantile(values, 0.9) - *quantile(values, 0.1)) / *median;
}

}  // namespace fragscope
