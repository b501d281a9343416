#include "replay/replay_summary.h"

#include <fmt/format.h>

namespace fragscope::replay {

ReplaySummary summarize_replay(const PreparedTrace& trace, const std::optional<std::string>& conf,
                               const Capacity& capacity, const Progress& progress) {
  ReplaySummary summary;
  summary.trace = &trace;
  summary.capacity = capacity;
  const alloc::AllocConfig config = conf ? alloc::parse_alloc_conf(*conf) : trace.recorded_config;
  summary.conf = alloc::to_alloc_conf(config);
  summary.conf_is_recorded = config == trace.recorded_config;

  ProgressCounter counter(progress, fmt::format("replaying {}", trace.source), "events", 2 * trace.ops.size());
  ReplayOptions options = replay_options_for(capacity);
  options.self_check = summary.conf_is_recorded;
  options.progress = &counter;
  summary.result = run_replay(trace, ModelKind::kCaching, config, options);
  options.timeline_points = 0;
  options.self_check = false;
  // An OOM after non-PyTorch memory grew: would the run have died at the capacity it started with?
  if (summary.result.oom && summary.result.oom_matches_recorded && capacity.steps.size() > 1) {
    ReplayOptions at_start = options;
    at_start.capacity_steps.clear();
    at_start.capacity = capacity.steps.front().bytes;
    summary.at_start_capacity = run_replay(trace, ModelKind::kCaching, config, at_start);
  }
  // The floor is the ideal packer's demand, whatever the device.
  options.capacity.reset();
  options.capacity_steps.clear();
  summary.ideal = run_replay(trace, ModelKind::kIdeal, config, options);
  return summary;
}

}  // namespace fragscope::replay
