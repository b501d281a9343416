#include "diagnose/input_pipeline.h"

#include "util/quantiles.h"

namespace fragscope::diagnose {

InputPipelineFindings analyze_input_pipeline(std::span<const inputs::StepRecord> records,
                                             std::span<const inputs::SmiGpuSummary> smi,
                                             const InputPipelineOptions& options) {
  InputPipelineFindings f;
  f.steps = records.size();
  f.data_wait_fraction = inputs::data_wait_fraction(records);
  if (records.size() >= 2) {
    f.first_wait_ms = records.front().data_wait_ms;
    f.steady_wait_fraction = inputs::data_wait_fraction(records.subspan(1));
  } else {
    f.steady_wait_fraction = f.data_wait_fraction;
  }
  std::vector<double> waits, computes;
  for (const inputs::StepRecord& r : records) {
    waits.push_back(r.data_wait_ms);
    computes.push_back(r.compute_ms);
  }
  f.median_wait_ms = quantile(waits, 0.5);
  f.median_compute_ms = quantile(computes, 0.5);
  for (const inputs::SmiGpuSummary& gpu : smi) {
    if (gpu.window_samples < kMinSmiTraceSamples || !gpu.idle_fraction) continue;
    if (!f.gpu_idle_fraction || *gpu.idle_fraction > *f.gpu_idle_fraction) {
      f.gpu_idle_fraction = gpu.idle_fraction;
      f.gpu_utilization_mean = gpu.utilization_mean;
    }
  }
  if (f.steady_wait_fraction) {
    f.basis = PipelineBasis::kDataWait;
    f.input_bound = *f.steady_wait_fraction >= options.wait_threshold;
  } else if (f.gpu_idle_fraction) {
    f.basis = PipelineBasis::kSmiTrace;
    f.idle_unexplained = *f.gpu_idle_fraction >= options.wait_threshold;
  }
  return f;
}

}  // namespace fragscope::diagnose
