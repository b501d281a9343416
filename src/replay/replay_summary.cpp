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
  // The floor is the ideal packer's demand, whatever the device.
  options.timeline_points = 0;
  options.capacity.reset();
  summary.ideal = run_replay(trace, ModelKind::kIdeal, config, options);
  return summary;
}

}  // namespace fragscope::replay
