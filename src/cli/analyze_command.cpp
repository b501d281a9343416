#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/json_output.h"
#include "cli/max_memory_option.h"
#include "cli/progress_bar.h"
#include "cli/text_output.h"
#include "metrics/snapshot_analysis.h"
#include "report/analyze_report.h"
#include "snapshot/snapshot_reader.h"
#include "util/error.h"

namespace fragscope::cli {

namespace {

struct AnalyzeOptions {
  std::string path;
  bool json = false;
  std::optional<int> device;  ///< default: the device holding the memory
  std::size_t top = 10;
  std::size_t map_rows = 16;
  snapshot::ReadLimits limits;
};

void run_analyze(const AnalyzeOptions& o, RunState& state) {
  ProgressBar bar(!state.quiet);
  const snapshot::Snapshot snap =
      snapshot::read_snapshot_file(o.path, snapshot::read_progress(bar.progress(), o.path), o.limits);
  auto analysis = metrics::analyze_snapshot(snap, o.device.value_or(snapshot::device_holding_memory(snap)), o.top);
  analysis.device_picked = !o.device;
  bar.close();
  if (o.device && !analysis.devices.empty() &&
      std::find(analysis.devices.begin(), analysis.devices.end(), *o.device) == analysis.devices.end())
    throw InputError(fmt::format("{}: no segments or trace for device {} (it has device{} {})", o.path, *o.device,
                                 analysis.devices.size() == 1 ? "" : "s", fmt::join(analysis.devices, ", ")));
  if (o.json) {
    print_json(report::analyze_json(analysis, o.path), 1);
  } else {
    print_text([&](std::ostream& out) { report::write_analyze_text(out, analysis, o.path, {o.map_rows, 64}); });
  }
  state.exit_code = 0;
}

}  // namespace

void add_analyze_command(CLI::App& app, RunState& state) {
  auto options = std::make_shared<AnalyzeOptions>();
  auto* cmd = app.add_subcommand("analyze", "Where the memory of a snapshot went, and why a large "
                                            "allocation could not be placed");
  cmd->add_option("FILE", options->path, "torch.cuda.memory._dump_snapshot() file (.pickle, .gz, .zst)")
      ->type_name("FILE")
      ->required();
  cmd->add_flag("--json", options->json, "print one JSON object instead of the text report");
  cmd->add_option("--device", options->device, "device ordinal to analyse (default: the one holding the memory)")
      ->type_name("N")
      ->check(whole_number(0, kMaxDeviceOrdinal));
  add_max_memory_option(cmd, options->limits);
  cmd->add_option("--top", options->top, "allocation sites to list")->type_name("N")->check(whole_number(0, 1'000'000));
  cmd->add_option("--map-rows", options->map_rows, "segments drawn in the map (0 = all)")
      ->type_name("N")
      ->check(whole_number(0, 1'000'000));
  cmd->callback([options, &state] { run_analyze(*options, state); });
}

}  // namespace fragscope::cli
