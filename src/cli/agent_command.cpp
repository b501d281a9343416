#include <unistd.h>

#include <atomic>
#include <iostream>
#include <memory>

#include "agent/agent.h"
#include "agent/agent_config.h"
#include "agent/event_log.h"
#include "agent/rank_simulator.h"
#include "agent/signals.h"
#include "cli/commands.h"
#include "cli/flag_checks.h"

namespace fragscope::cli {
namespace {

std::atomic<bool> stop_requested{false};

std::string default_node_name() {
  if (const char* node = std::getenv("NODE_NAME"); node != nullptr && *node != '\0') return node;
  char host[256] = {};
  return ::gethostname(host, sizeof host - 1) == 0 ? std::string(host) : std::string();
}

struct AgentFlags {
  agent::AgentOptions options;
  std::string config_path;
  std::string event_log;
  double poll_seconds = 1.0;
  double stale_seconds = 60.0;
  bool dry_run = false;
  std::vector<std::string> simulate;
  double simulate_speed = 1.0;
};

}  // namespace

void add_agent_command(CLI::App& app, RunState& state) {
  auto flags = std::make_shared<AgentFlags>();
  flags->options.node = default_node_name();
  auto* cmd = app.add_subcommand("agent", "Node daemon: rank files + NVML -> /metrics, alerts and actions");
  cmd->add_option("--listen", flags->options.listen, "Address for /metrics and /healthz (loopback by default)")
      ->type_name("HOST:PORT")
      ->capture_default_str();
  cmd->add_option("--rank-dir", flags->options.rank_dir, "Directory of the hooks' rank files")
      ->type_name("DIR")
      ->capture_default_str();
  cmd->add_option("--config", flags->config_path,
                  "TOML file with [thresholds] and [actions] (deploy/kubernetes/agent.toml)")
      ->type_name("FILE");
  cmd->add_option("--poll-interval", flags->poll_seconds, "Seconds between polls")
      ->type_name("SECONDS")
      ->capture_default_str()
      ->check(number_between(0.05, 3600.0, "seconds"));
  cmd->add_option("--stale-after", flags->stale_seconds, "Seconds without an update before a rank is dropped")
      ->type_name("SECONDS")
      ->capture_default_str()
      ->check(number_between(1.0, 86400.0, "seconds"));
  cmd->add_option("--nvml-library", flags->options.nvml_library, "NVML to dlopen")
      ->type_name("FILE")
      ->capture_default_str();
  cmd->add_option("--node", flags->options.node, "Node name for the drain command's {node}")
      ->type_name("NAME")
      ->capture_default_str();
  cmd->add_option("--event-log", flags->event_log, "Append JSON-lines events here instead of stderr")
      ->type_name("FILE");
  cmd->add_flag("--dry-run", flags->dry_run, "Log the actions that would run; run none");
  cmd->add_option("--simulate", flags->simulate,
                  "Replay recorded runs (folders with steps.jsonl, or the files) as live ranks in --rank-dir")
      ->type_name("PATH")
      ->expected(1, -1);
  cmd->add_option("--simulate-speed", flags->simulate_speed, "Recorded seconds per second in --simulate")
      ->type_name("X")
      ->capture_default_str()
      ->check(number_between(0.01, 1000.0, "a speed-up"));
  cmd->callback([flags, &state] {
    agent::AgentConfig config;
    if (!flags->config_path.empty()) config = agent::load_agent_config(flags->config_path);
    if (flags->dry_run) config.actions.dry_run = true;
    flags->options.poll_interval = std::chrono::milliseconds(static_cast<std::int64_t>(flags->poll_seconds * 1000));
    flags->options.stale_after = std::chrono::seconds(static_cast<std::int64_t>(flags->stale_seconds));
    std::unique_ptr<agent::EventLogFile> log_file;
    if (!flags->event_log.empty()) log_file = std::make_unique<agent::EventLogFile>(flags->event_log);
    std::ostream& events = log_file ? *log_file : std::cerr;
    agent::install_agent_signal_handlers(stop_requested);
    std::vector<agent::RecordedRun> runs;
    for (const auto& path : flags->simulate) runs.push_back(agent::load_recorded_run(path));
    std::unique_ptr<agent::RankSimulator> simulator;
    if (!runs.empty()) {
      simulator =
          std::make_unique<agent::RankSimulator>(std::move(runs), flags->options.rank_dir, flags->simulate_speed);
    }
    agent::Agent daemon(flags->options, config, events);
    daemon.run(stop_requested);
    state.exit_code = 0;
  });
}

}  // namespace fragscope::cli
