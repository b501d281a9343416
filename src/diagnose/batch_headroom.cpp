#include "diagnose/batch_headroom.h"

namespace fragscope::diagnose {

std::optional<double> exceeding_batch_factor(const ProjectedStep& step, std::uint64_t limit_bytes) {
  const TraceStepProjection& p = step.figures;
  if (!p.available || !step.peak_at_factor || p.projected_peak_bytes >= limit_bytes) return std::nullopt;
  const auto at_one = static_cast<double>(step.peak_at_factor(1.0));
  const auto exceeds = [&](double factor) {
    const double growth = static_cast<double>(step.peak_at_factor(factor)) - at_one;
    return static_cast<double>(p.projected_peak_bytes) + growth > static_cast<double>(limit_bytes);
  };
  if (!exceeds(kMaxBatchFactor)) return std::nullopt;
  double fits = 1.0, exceeds_at = kMaxBatchFactor;  // the peak grows with the factor (exponents ≥ 0)
  while (exceeds_at / fits > 1.001) {
    const double middle = (fits + exceeds_at) / 2;
    (exceeds(middle) ? exceeds_at : fits) = middle;
  }
  return exceeds_at;
}

}  // namespace fragscope::diagnose
