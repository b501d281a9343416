#pragma once
/// @file input_pipeline.h
/// @brief Does the GPU wait for data? The loader-wait share of step time from telemetry, and
/// the GPU's idle share from a sampled nvidia-smi trace.
///
/// `data_wait_fraction` is truth.json's definition: Σ data_wait_ms / Σ (data_wait_ms +
/// compute_ms) over every record. The verdict uses the *steady* share, which leaves out the
/// first record: the first batch waits for the loader workers to start (seconds, once), which
/// says nothing about the pipeline's throughput. A run is input-bound when the steady share
/// reaches the threshold (10% by default).
///
/// Without loader waits (no telemetry, or telemetry without data_wait_ms) the question is
/// decided from the nvidia-smi trace only where it can be: a GPU busy in all but the threshold's
/// share of the samples is not waiting for data; a GPU idle more often may be waiting for data
/// or for anything else (communication, the CPU, checkpoints), which only the waits tell apart;
/// with neither, nothing was measured. `basis` says which.
/// Thread-safety: pure functions.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "inputs/nvidia_smi_trace.h"
#include "inputs/step_telemetry.h"

namespace fragscope::diagnose {

/// @brief A trace needs this many samples of one GPU before its idle share means anything.
inline constexpr std::size_t kMinSmiTraceSamples = 10;

struct InputPipelineOptions {
  double wait_threshold = 0.10;  ///< steady wait share at or above which the run is input-bound
};

/// @brief What answered "does the GPU wait for data".
enum class PipelineBasis : std::uint8_t {
  kDataWait,  ///< the loader waits of step telemetry
  kSmiTrace,  ///< the GPU's idle share in an nvidia-smi trace (no waits measured)
  kNothing,   ///< neither was given: not measured
};

struct InputPipelineFindings {
  std::size_t steps = 0;
  std::optional<double> data_wait_fraction;    ///< all records
  std::optional<double> steady_wait_fraction;  ///< without the first record (when there are two+)
  std::optional<double> first_wait_ms;         ///< the warm-up record's wait
  std::optional<double> median_wait_ms;
  std::optional<double> median_compute_ms;
  std::optional<double> gpu_idle_fraction;     ///< smi trace, busy window, worst GPU
  std::optional<double> gpu_utilization_mean;  ///< smi trace, same GPU
  PipelineBasis basis = PipelineBasis::kNothing;
  bool input_bound = false;  ///< only ever from measured waits
  /// No waits measured, and the GPU idles in at least the threshold's share of the samples:
  /// the trace cannot say whether it waits for data.
  bool idle_unexplained = false;
};

/// @brief Analyses `records` (one rank) and the sampled GPUs in `smi` (traces with fewer than
/// kMinSmiTraceSamples samples per GPU are ignored).
InputPipelineFindings analyze_input_pipeline(std::span<const inputs::StepRecord> records,
                                             std::span<const inputs::SmiGpuSummary> smi,
                                             const InputPipelineOptions& options = {});

}  // namespace fragscope::diagnose
