#include "diagnose/projected_runs.h"

#include <algorithm>
#include <functional>

#include "replay/replay_engine.h"
#include "replay/replay_memory.h"

namespace fragscope::diagnose {
namespace {

/// True when the replay served every malloc of the projection; `memory_bytes` grows to the most
/// the replay held. `factor` scales the device: its cudaMalloc limit (each of its steps over time, which
/// would otherwise hold the projected step at the recorded capacity) and any memory-fraction cap.
bool runs_at(const replay::PreparedTrace& trace, const replay::WhatIfConfig& config, const replay::Capacity& capacity,
             double factor, std::uint64_t& memory_bytes,
             replay::ElasticAllocs elastic = replay::ElasticAllocs::kServe, std::uint64_t* peak_reserved = nullptr) {
  if (factor <= 0) return false;  // a margin of the whole capacity or more: nothing runs with it
  replay::ReplayOptions options = replay::replay_options_for(capacity);
  const auto scaled = [&](std::uint64_t bytes) {
    return static_cast<std::uint64_t>(static_cast<double>(bytes) * factor);
  };
  if (options.capacity) options.capacity = scaled(*options.capacity);
  for (replay::CapacityStep& step : options.capacity_steps) step.bytes = scaled(step.bytes);
  if (options.allowed_memory_maximum) options.allowed_memory_maximum = scaled(*options.allowed_memory_maximum);
  options.timeline_points = 0;
  options.elastic = elastic;
  const replay::ReplayResult result = replay::run_replay(trace, replay::ModelKind::kCaching, config.config, options);
  memory_bytes = std::max(memory_bytes, result.memory_bytes);
  if (peak_reserved) *peak_reserved = result.stats.peak_reserved_bytes;
  return !result.oom;
}

}  // namespace

void replay_projected_step(ProjectedStep& step, const std::vector<replay::WhatIfConfig>& configs,
                           const replay::Capacity& capacity, unsigned threads) {
  TraceStepProjection& p = step.figures;
  replay::ReplayOptions unlimited = replay::replay_options_for(capacity);
  unlimited.capacity = std::nullopt;
  unlimited.capacity_steps.clear();
  unlimited.timeline_points = 0;
  p.runs.assign(configs.size(), {});
  // The settings' replays first: the first runs alone and sets how many run at once (replay_memory.h).
  std::vector<std::function<std::uint64_t()>> tasks;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    tasks.emplace_back([&, i] {
      ProjectedRun& run = p.runs[i];
      run.conf = configs[i].conf;
      run.recorded = configs[i].recorded;
      std::uint64_t held = 0;
      if (!capacity.effective_bytes()) return held;
      run.relaid_start = replay::relays_initial_state(step.trace, configs[i].config);
      run.runs = runs_at(step.trace, configs[i], capacity, 1.0, held, replay::ElasticAllocs::kServe,
                         &run.peak_reserved_bytes);
      if (run.runs)
        run.runs_with_margin = runs_at(step.trace, configs[i], capacity,
                                       1 - p.margin_to_fit - (run.relaid_start ? p.relaid_start_margin : 0), held);
      else {
        run.runs_above_capacity = runs_at(step.trace, configs[i], capacity, 1 + kProjectionFloor, held,
                                         replay::ElasticAllocs::kRefuseWhenFull);
        run.fails_with_margin = !(run.runs_above_capacity && p.margin_to_fail >= kProjectionFloor) &&
                                !runs_at(step.trace, configs[i], capacity, 1 + p.margin_to_fail, held,
                                         replay::ElasticAllocs::kRefuseWhenFull);
      }
      return held;
    });
  }
  tasks.emplace_back([&] {
    const replay::ReplayResult ideal =
        replay::run_replay(step.trace, replay::ModelKind::kIdeal, step.trace.recorded_config, unlimited);
    p.projected_peak_bytes = ideal.stats.peak_reserved_bytes;
    return ideal.memory_bytes;
  });
  const bool elastic = replay::has_elastic_allocs(step.trace);
  if (elastic) {
    tasks.emplace_back([&] {
      replay::ReplayOptions without = unlimited;
      without.elastic = replay::ElasticAllocs::kSkip;
      const replay::ReplayResult floor =
          replay::run_replay(step.trace, replay::ModelKind::kIdeal, step.trace.recorded_config, without);
      p.inelastic_peak_bytes = floor.stats.peak_reserved_bytes;
      return floor.memory_bytes;
    });
  }
  replay::run_replays(tasks, threads, replay::replay_memory_budget(step.trace));
  if (!elastic) p.inelastic_peak_bytes = p.projected_peak_bytes;
}

}  // namespace fragscope::diagnose
