#pragma once
/// @file nvidia_smi_trace.h
/// @brief What an nvidia-smi trace says about one GPU: utilisation level and idle share, and
/// the memory the driver saw in use.
///
/// A trace recorded around a job also covers its start-up (CUDA init, model build) and its
/// end, where the GPU idles for reasons unrelated to the input pipeline. The idle share is
/// therefore measured over the busy window: from the first to the last sample at or above the
/// idle threshold. A trace with no such sample is idle throughout (idle share 1).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "inputs/nvidia_smi_csv.h"

namespace fragscope::inputs {

struct SmiTraceOptions {
  double idle_below_percent = 10.0;  ///< a sample with utilization.gpu below this is idle
};

struct SmiGpuSummary {
  int gpu = 0;
  std::size_t samples = 0;              ///< rows of this GPU
  std::size_t utilization_samples = 0;  ///< rows with a utilization.gpu value
  std::size_t window_samples = 0;       ///< utilisation rows inside the busy window
  std::optional<double> utilization_mean;  ///< percent, over the busy window
  std::optional<double> utilization_p50;
  std::optional<double> utilization_p90;
  std::optional<double> idle_fraction;      ///< share of busy-window samples below the threshold
  std::optional<double> window_seconds;     ///< busy window length from timestamps
  std::optional<std::uint64_t> memory_used_peak;
  std::optional<std::uint64_t> memory_total;  ///< largest memory.total reported
};

/// @brief One summary per GPU in `table`, by ascending GPU index.
std::vector<SmiGpuSummary> summarize_smi_trace(const SmiTable& table, const SmiTraceOptions& options = {});

}  // namespace fragscope::inputs
