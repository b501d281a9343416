#include "diagnose/input_pipeline.h"

#include "snapshot/telemetry_quantiles.h"

namespace fragscope::diagnose {

InputPipelineFindings analyze_input_pipeline(std::span<const snapshot::StepRecord> records,
                                             std::span<const snapshot::SmiGpuSummary> smi,
                                             const InputPipelineOptions& options) {
  InputPipelineFindings f;
  f.steps = records.size();
  f.data_wait_fraction = snapshot::data_wait_fraction(records);
  if (records.size() >= 2) {
    f.first_wait_ms = records.front().data_wait_ms;
    f.steady_wait_fraction = snapshot::data_wait_fraction(records.subspan(1));
  } else {
    f.steady_wait_fraction = f.data_wait_fraction;
  }
  std::vector<double> waits, computes;
  for (const snapshot::StepRecord& r : records) {
    waits.push_back(r.data_wait_ms);
    computes.push_back(r.compute_ms);
  }
  f.median_wait_ms = snapshot::quantile(waits, 0.5);
  f.median_compute_ms = snapshot::quantile(computes, 0.5);
  for (const snapshot::SmiGpuSummary& gpu : smi) {
    if (gpu.window_samples < kMinSmiTraceSamples || !gpu.idle_fraction) continue;
    if (!f.gpu_idle_fraction || *gpu.idle_fraction > *f.gpu_idle_fraction) {
      f.gpu_idle_fraction = gpu.idle_fraction;
      f.gpu_utilization_mean = gpu.utilization_mean;
    }
  }
  f.input_bound = f.steady_wait_fraction && *f.steady_wait_fraction >= options.wait_threshold;
  return f;
}

}  // namespace fragscope::diagnose
