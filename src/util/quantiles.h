#pragma once
/// @file quantiles.h
/// @brief Quantiles and spreads of measured series (step times, utilisation samples).

#include <optional>
#include <vector>

namespace fragscope {

/// @brief The q-quantile (0 ≤ q ≤ 1) of `values` by linear interpolation between closest ranks
/// (numpy's default), e.g. q = 0.5 is the median.
/// @return nullopt when `values` is empty.
std::optional<double> quantile(std::vector<double> values, double q);

/// @brief (p90 − p10) / median: how far a steady series wanders, relative to its level.
/// @return nullopt when `values` is empty or its median is not positive.
std::optional<double> relative_spread(const std::vector<double>& values);

}  // namespace fragscope
