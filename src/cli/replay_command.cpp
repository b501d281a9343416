#include <iostream>
#include <memory>
#include <optional>

#include "alloc/alloc_config.h"
#include "cli/capacity_options.h"
#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/json_output.h"
#include "cli/max_memory_option.h"
#include "cli/progress_bar.h"
#include "cli/text_output.h"
#include "replay/prepared_trace.h"
#include "replay/replay_summary.h"
#include "report/replay_report.h"
#include "snapshot/snapshot_reader.h"

namespace fragscope::cli {
namespace {

struct ReplayFlags {
  std::string path;
  std::optional<std::string> alloc_conf;
  bool json = false;
  CapacityFlags device;
  snapshot::ReadLimits limits;
};

void run_replay_command(const ReplayFlags& f, RunState& state) {
  const replay::CapacityRequest request = f.device.request();
  if (f.alloc_conf) alloc::parse_alloc_conf(*f.alloc_conf);  // refuse a bad config before reading
  ProgressBar bar(!state.quiet);
  // The snapshot is dropped once compiled: the replays need only the (smaller) op list.
  const replay::PreparedTrace trace = [&] {
    const snapshot::Snapshot snap =
        snapshot::read_snapshot_file(f.path, snapshot::read_progress(bar.progress(), f.path), f.limits);
    return replay::prepare_trace(snap, f.device.device.value_or(snapshot::busiest_device(snap)), f.path);
  }();
  const replay::Capacity capacity = replay::resolve_capacity(trace, request);
  const replay::ReplaySummary summary = replay::summarize_replay(trace, f.alloc_conf, capacity, bar.progress());
  bar.close();
  if (f.json) {
    print_json(report::replay_json(summary), 1);
  } else {
    print_text([&](std::ostream& out) { report::write_replay_text(out, summary); });
  }
  state.exit_code = summary.result.oom ? 1 : 0;
}

}  // namespace

void add_replay_command(CLI::App& app, RunState& state) {
  auto flags = std::make_shared<ReplayFlags>();
  auto* cmd = app.add_subcommand(
      "replay", "Replay a snapshot's allocator trace through a faithful model of PyTorch's "
                "caching allocator: peaks, retries, OOM, under the recorded or another config");
  cmd->add_option("SNAPSHOT", flags->path, "torch.cuda.memory._dump_snapshot() file with a trace")
      ->type_name("FILE")
      ->required();
  cmd->add_option("--alloc-conf", flags->alloc_conf,
                  "PYTORCH_CUDA_ALLOC_CONF to replay under, 'default' for PyTorch's defaults (default: the "
                  "snapshot's own allocator_settings)")
      ->type_name("CONF")
      ->transform(alloc_conf_value);
  cmd->add_flag("--json", flags->json, "print one JSON object instead of the text report");
  add_capacity_flags(cmd, flags->device);
  add_max_memory_option(cmd, flags->limits);
  cmd->callback([flags, &state] { run_replay_command(*flags, state); });
}

}  // namespace fragscope::cli
