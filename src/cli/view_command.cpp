#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "agent/signals.h"
#include "cli/commands.h"
#include "cli/max_memory_option.h"
#include "cli/progress_bar.h"
#include "diagnose/doctor_inputs.h"
#include "http/server.h"
#include "view/view_endpoint.h"
#include "view/view_page.h"
#include "view/viewed_snapshot.h"

namespace fragscope::cli {
namespace {

std::atomic<bool> stop_requested{false};

struct ViewFlags {
  std::vector<std::string> paths;
  std::string listen = "127.0.0.1:0";
  snapshot::ReadLimits limits;
};

void run_view_command(const ViewFlags& f, RunState& state) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<view::ViewedSnapshot>> snapshots;
  {
    ProgressBar bar(!state.quiet);
    for (const std::string& path : f.paths) {
      diagnose::DoctorInputs inputs = diagnose::collect_doctor_inputs({path}, f.limits, bar.progress());
      snapshots.push_back(std::make_unique<view::ViewedSnapshot>(path, std::move(inputs)));
    }
  }
  std::vector<view::ViewedSnapshot*> served;
  for (const auto& snapshot : snapshots) served.push_back(snapshot.get());
  view::ViewEndpoint endpoint(served, view::view_page_html());
  if (const std::string warning = view::exposure_warning(f.listen); !warning.empty()) {
    std::cerr << "fragscope view: warning: " << warning << '\n';
  }
  agent::install_agent_signal_handlers(stop_requested);
  http::Server server(f.listen, [&endpoint](const http::Request& request) { return endpoint.handle(request); });
  endpoint.set_port(server.port());
  const std::string host = f.listen.substr(0, f.listen.rfind(':'));
  const double ready = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << fmt::format("fragscope view: {} snapshot{} read and indexed in {:.1f} s\n", snapshots.size(),
                           snapshots.size() == 1 ? "" : "s", ready)
            << fmt::format("fragscope view: serving http://{}:{}/ (Ctrl-C to stop)\n",
                           host.empty() || host == "0.0.0.0" ? "127.0.0.1" : host, server.port())
            << std::flush;
  while (!stop_requested.load()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::cout << "fragscope view: stopped\n" << std::flush;
  state.exit_code = 0;
  // A what-if replay or the doctor may still be running on its thread; nothing is left to save.
  std::fflush(nullptr);
  std::_Exit(0);
}

}  // namespace

void add_view_command(CLI::App& app, RunState& state) {
  auto flags = std::make_shared<ViewFlags>();
  auto* cmd = app.add_subcommand("view", "Browse snapshots of any size in a browser: memory over time, the segments at "
                                         "any event, stacks, sites, diffs, what-if curves and the doctor's verdict");
  cmd->add_option("SNAPSHOT", flags->paths,
                  "torch.cuda.memory._dump_snapshot() files (.pickle, .gz, .zst), or folders holding one")
      ->type_name("SNAPSHOT")
      ->required();
  cmd->add_option("--listen", flags->listen, "Address to serve the page on (loopback by default; port 0: a free one)")
      ->type_name("HOST:PORT")
      ->capture_default_str();
  add_max_memory_option(cmd, flags->limits);
  cmd->callback([flags, &state] { run_view_command(*flags, state); });
}

}  // namespace fragscope::cli
