#include <algorithm>
#include <iostream>
#include <memory>
#include <vector>

#include "alloc/alloc_config.h"
#include "cli/capacity_options.h"
#include "cli/commands.h"
#include "cli/read_snapshot.h"
#include "replay/prepared_trace.h"
#include "replay/whatif.h"
#include "report/replay_report.h"
#include "snapshot/snapshot_reader.h"

namespace fragscope::cli {
namespace {

struct WhatIfFlags {
  std::string path;
  std::vector<std::string> extra_confs;
  bool json = false;
  bool min_capacity = false;
  unsigned threads = 0;
  CapacityFlags device;
  snapshot::ReadLimits limits;
};

void run_whatif_command(const WhatIfFlags& f, RunState& state) {
  const replay::CapacityRequest request = f.device.request();
  std::vector<replay::WhatIfConfig> extra;
  for (const std::string& conf : f.extra_confs) {
    const alloc::AllocConfig config = alloc::parse_alloc_conf(conf);  // validate before reading
    extra.push_back({alloc::to_alloc_conf(config), config, false});
  }
  // The snapshot is dropped once compiled: the replays need only the (smaller) op list.
  const replay::PreparedTrace trace = [&] {
    const snapshot::Snapshot snap = read_snapshot_with_progress(f.path, f.limits);
    return replay::prepare_trace(snap, f.device.device.value_or(snapshot::busiest_device(snap)),
                                 f.path);
  }();
  const replay::Capacity capacity = replay::resolve_capacity(trace, request);
  std::vector<replay::WhatIfConfig> configs =
      replay::standard_sweep(trace, capacity.allowed_maximum.has_value());
  for (replay::WhatIfConfig& c : extra) {
    const bool known = std::any_of(configs.begin(), configs.end(),
                                   [&](const replay::WhatIfConfig& k) { return k.config == c.config; });
    if (!known) configs.push_back(std::move(c));
  }
  replay::WhatIfOptions options;
  options.min_capacity = f.min_capacity;
  options.threads = f.threads;
  const replay::WhatIfReport report = replay::run_whatif(trace, configs, capacity, options);
  if (f.json) {
    std::cout << report::whatif_json(trace, report).dump(1) << '\n';
  } else {
    report::write_whatif_text(std::cout, trace, report);
  }
  state.exit_code = report.recommended ? 0 : 1;
}

}  // namespace

void add_whatif_command(CLI::App& app, RunState& state) {
  auto flags = std::make_shared<WhatIfFlags>();
  auto* cmd = app.add_subcommand(
      "whatif", "Replay a snapshot's trace under a sweep of allocator configs in parallel: peak "
                "reserved per config, OOM at the capacity, and the config to use");
  cmd->add_option("SNAPSHOT", flags->path, "torch.cuda.memory._dump_snapshot() file with a trace")
      ->required();
  cmd->add_option("--alloc-conf", flags->extra_confs,
                  "also try this PYTORCH_CUDA_ALLOC_CONF (repeatable)");
  cmd->add_flag("--min-capacity", flags->min_capacity,
                "bisect, per config, the smallest capacity at which the trace survives");
  cmd->add_option("--threads", flags->threads, "worker threads (default: all cores)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", flags->json, "print one JSON object instead of the table");
  add_capacity_flags(cmd, flags->device);
  add_max_memory_option(cmd, flags->limits);
  cmd->callback([flags, &state] { run_whatif_command(*flags, state); });
}

}  // namespace fragscope::cli
