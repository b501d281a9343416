#pragma once
/// @file commands.h
/// @brief One function per subcommand; each adds itself to the app and sets the exit status.
///
/// Exit status convention for every subcommand: 0 = ran and found nothing wrong (or the
/// command has no verdict), 1 = ran and found a problem (doctor finding, failed criteria,
/// OOM in a replay), 2 = unusable input or wrong flags (one line on stderr naming the file).

#include <CLI/CLI.hpp>

namespace fragscope::cli {

/// @brief Shared between main() and the subcommands: the flags of the app itself and the status
/// to exit with.
struct RunState {
  bool quiet = false;  ///< --quiet: no progress bar
  int exit_code = 0;
};

void add_analyze_command(CLI::App& app, RunState& state);
void add_agent_command(CLI::App& app, RunState& state);
void add_check_command(CLI::App& app, RunState& state);
void add_doctor_command(CLI::App& app, RunState& state);
void add_replay_command(CLI::App& app, RunState& state);
void add_whatif_command(CLI::App& app, RunState& state);
void add_plan_command(CLI::App& app, RunState& state);
void add_view_command(CLI::App& app, RunState& state);
/// @brief The hidden `completion bash|zsh` and `man`: what `app`'s definitions generate.
void add_generated_docs_commands(CLI::App& app, RunState& state);

}  // namespace fragscope::cli
