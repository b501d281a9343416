#include <iostream>
#include <memory>
#include <vector>

#include "cli/capacity_options.h"
#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/json_output.h"
#include "cli/max_memory_option.h"
#include "cli/progress_bar.h"
#include "cli/text_output.h"
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
  for (const std::string& conf : f.extra_confs) extra.push_back(replay::user_config(conf));  // checked before reading
  ProgressBar bar(!state.quiet);
  // The snapshot is dropped once compiled: the replays need only the (smaller) op list.
  const replay::PreparedTrace trace = [&] {
    const snapshot::Snapshot snap =
        snapshot::read_snapshot_file(f.path, snapshot::read_progress(bar.progress(), f.path), f.limits);
    return replay::prepare_trace(snap, f.device.device.value_or(snapshot::busiest_device(snap)),
                                 f.path);
  }();
  replay::WhatIfOptions options;
  options.min_capacity = f.min_capacity;
  options.threads = f.threads;
  options.progress = bar.progress();
  const replay::WhatIfReport report =
      replay::sweep_at_capacity(trace, replay::resolve_capacity(trace, request), options, std::move(extra));
  bar.close();
  if (f.json) {
    print_json(report::whatif_json(trace, report), 1);
  } else {
    print_text([&](std::ostream& out) { report::write_whatif_text(out, trace, report); });
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
      ->type_name("FILE")
      ->required();
  cmd->add_option("--alloc-conf", flags->extra_confs,
                  "also try this PYTORCH_CUDA_ALLOC_CONF, 'default' for PyTorch's defaults")
      ->type_name("CONF")
      ->transform(alloc_conf_value);
  cmd->add_flag("--min-capacity", flags->min_capacity,
                "bisect, per config, the smallest capacity at which the trace survives");
  cmd->add_option("--threads", flags->threads, "worker threads (default: all cores)")
      ->type_name("N")
      ->check(whole_number(1, kMaxThreads));
  cmd->add_flag("--json", flags->json, "print one JSON object instead of the table");
  add_capacity_flags(cmd, flags->device);
  add_max_memory_option(cmd, flags->limits);
  cmd->callback([flags, &state] { run_whatif_command(*flags, state); });
}

}  // namespace fragscope::cli
