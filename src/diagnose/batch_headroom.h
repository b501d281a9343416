#pragma once
/// @file batch_headroom.h
/// @brief How much larger than the failing step a batch may be before its step needs more than
/// the device even with perfect packing: what decides a step that fits, or fits too closely to
/// tell, when the job's batches vary (dynamic padding, variable lengths). The trace holds the
/// batches it ran; whether the run meets a larger one is in the job's data, and this says how
/// much larger is enough.
///
/// The growth is the projection's own (trace_projection.h, peak_at_factor): every allocation of
/// the reference scaled as the fit says it follows the scale, begun as the failing unit began.
/// It is added to the failing step's projected peak (the ideal packer's, projected_peak_bytes),
/// so the factor is the least f with projected_peak_bytes + peak_at(f) − peak_at(1) > limit.
/// Thread-safety: a pure function over read-only inputs.

#include <cstdint>
#include <optional>

#include "diagnose/trace_projection.h"

namespace fragscope::diagnose {

/// The largest factor looked at: a batch four times the failing one's is another job.
inline constexpr double kMaxBatchFactor = 4.0;

/// @brief The least factor in (1, kMaxBatchFactor] of the failing unit's sizes whose step needs
/// more than `limit_bytes` live with perfect packing (within 0.1%); nullopt when the step is not
/// projected, its peak already exceeds the limit, or not even kMaxBatchFactor does.
std::optional<double> exceeding_batch_factor(const ProjectedStep& step, std::uint64_t limit_bytes);

}  // namespace fragscope::diagnose
