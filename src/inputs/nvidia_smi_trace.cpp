#include "inputs/nvidia_smi_trace.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "util/quantiles.h"

namespace fragscope::inputs {

namespace {

SmiGpuSummary summarize_gpu(int gpu, const std::vector<const SmiSample*>& rows,
                            const SmiTraceOptions& options) {
  SmiGpuSummary summary;
  summary.gpu = gpu;
  summary.samples = rows.size();
  std::vector<const SmiSample*> with_util;
  for (const auto* row : rows) {
    if (row->memory_used)
      summary.memory_used_peak = std::max(summary.memory_used_peak.value_or(0), *row->memory_used);
    if (row->memory_total)
      summary.memory_total = std::max(summary.memory_total.value_or(0), *row->memory_total);
    if (row->utilization_gpu) with_util.push_back(row);
  }
  summary.utilization_samples = with_util.size();
  if (with_util.empty()) return summary;

  const auto busy = [&](const SmiSample* s) { return *s->utilization_gpu >= options.idle_below_percent; };
  auto first = std::find_if(with_util.begin(), with_util.end(), busy);
  auto last = std::find_if(with_util.rbegin(), with_util.rend(), busy);
  std::vector<const SmiSample*> window;
  if (first == with_util.end()) {
    window = with_util;  // never busy: the whole trace is idle
  } else {
    window.assign(first, last.base());
  }
  summary.window_samples = window.size();
  std::vector<double> utilization;
  utilization.reserve(window.size());
  for (const auto* s : window) utilization.push_back(*s->utilization_gpu);
  summary.utilization_mean =
      std::accumulate(utilization.begin(), utilization.end(), 0.0) / static_cast<double>(utilization.size());
  summary.utilization_p50 = quantile(utilization, 0.5);
  summary.utilization_p90 = quantile(utilization, 0.9);
  const auto idle = std::count_if(utilization.begin(), utilization.end(),
                                  [&](double u) { return u < options.idle_below_percent; });
  summary.idle_fraction = static_cast<double>(idle) / static_cast<double>(utilization.size());
  if (window.front()->time_s && window.back()->time_s)
    summary.window_seconds = *window.back()->time_s - *window.front()->time_s;
  return summary;
}

}  // namespace

std::vector<SmiGpuSummary> summarize_smi_trace(const SmiTable& table, const SmiTraceOptions& options) {
  std::map<int, std::vector<const SmiSample*>> by_gpu;
  for (const auto& sample : table.samples) by_gpu[sample.gpu].push_back(&sample);
  std::vector<SmiGpuSummary> summaries;
  for (const auto& [gpu, rows] : by_gpu) summaries.push_back(summarize_gpu(gpu, rows, options));
  return summaries;
}

}  // namespace fragscope::inputs
