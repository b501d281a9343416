#include "diagnose/projected_runs.h"

#include <algorithm>
#include <functional>
#include <thread>

#include "replay/replay_engine.h"
#include "util/run_parallel.h"

namespace fragscope::diagnose {
namespace {

/// True when the replay served every malloc of the projection.
/// `factor` scales the device: its cudaMalloc limit and any memory-fraction cap.
bool runs_at(const replay::PreparedTrace& trace, const replay::WhatIfConfig& config, const replay::Capacity& capacity,
             double factor) {
  replay::ReplayOptions options = replay::replay_options_for(capacity);
  const auto scaled = [&](std::uint64_t bytes) {
    return static_cast<std::uint64_t>(static_cast<double>(bytes) * factor);
  };
  if (options.capacity) options.capacity = scaled(*options.capacity);
  if (options.allowed_memory_maximum) options.allowed_memory_maximum = scaled(*options.allowed_memory_maximum);
  options.timeline_points = 0;
  return !replay::run_replay(trace, replay::ModelKind::kCaching, config.config, options).oom;
}

}  // namespace

void replay_projected_step(ProjectedStep& step, const std::vector<replay::WhatIfConfig>& configs,
                           const replay::Capacity& capacity, unsigned threads) {
  TraceStepProjection& p = step.figures;
  replay::ReplayOptions unlimited = replay::replay_options_for(capacity);
  unlimited.capacity = std::nullopt;
  unlimited.timeline_points = 0;
  p.runs.assign(configs.size(), {});
  std::vector<std::function<void()>> tasks;
  tasks.emplace_back([&] {
    p.projected_peak_bytes =
        replay::run_replay(step.trace, replay::ModelKind::kIdeal, step.trace.recorded_config, unlimited)
            .stats.peak_reserved_bytes;
  });
  for (std::size_t i = 0; i < configs.size(); ++i) {
    tasks.emplace_back([&, i] {
      ProjectedRun& run = p.runs[i];
      run.conf = configs[i].conf;
      run.recorded = configs[i].recorded;
      if (!capacity.effective_bytes()) return;
      run.runs = runs_at(step.trace, configs[i], capacity, 1.0);
      if (run.runs)
        run.runs_with_margin = runs_at(step.trace, configs[i], capacity, 1 - p.margin_to_fit);
      else
        run.fails_with_margin = !runs_at(step.trace, configs[i], capacity, 1 + p.margin_to_fail);
    });
  }
  const unsigned pool = threads ? threads : std::max(1u, std::thread::hardware_concurrency());
  run_parallel(tasks, std::min<unsigned>(pool, static_cast<unsigned>(tasks.size())));
}

}  // namespace fragscope::diagnose
