#include <cstdio>
#include <exception>

#include <fmt/format.h>

#include "cli/commands.h"
#include "util/error.h"

int main(int argc, char** argv) {
  CLI::App app{"fragscope: why a GPU training job ran out of memory or sits idle, from its own data"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "fragscope 0.1.0");
  fragscope::cli::RunState state;
  fragscope::cli::add_analyze_command(app, state);
  fragscope::cli::add_agent_command(app, state);
  fragscope::cli::add_check_command(app, state);
  fragscope::cli::add_doctor_command(app, state);
  fragscope::cli::add_replay_command(app, state);
  fragscope::cli::add_whatif_command(app, state);
  fragscope::cli::add_plan_command(app, state);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fputs(fmt::format("fragscope: error: {}\n", e.what()).c_str(), stderr);
    return 2;
  } catch (const fragscope::InputError& e) {
    std::fputs(fmt::format("fragscope: error: {}\n", e.what()).c_str(), stderr);
    return 2;
  } catch (const std::bad_alloc&) {
    std::fputs("fragscope: error: out of memory\n", stderr);
    return 2;
  } catch (const std::exception& e) {
    std::fputs(fmt::format("fragscope: internal error: {}\n", e.what()).c_str(), stderr);
    return 3;
  }
  return state.exit_code;
}
