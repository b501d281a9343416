#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/suggestions.h"
#include "util/build_info.h"
#include "util/error.h"
#include "util/shown_text.h"

namespace {

/// The footer's paragraphs after the sizes: "Title: text", as the man page's sections.
constexpr const char* kMoreHelp =
    "Exit status: 0 nothing wrong, 1 a problem found (an OOM, a failed criterion, a job that does not fit),\n"
    "2 unusable input or wrong flags, 3 an internal error.\n\n"
    "See also: 'fragscope COMMAND --help' for a command's flags; the docs/ folder of the source for every\n"
    "line of output and every JSON field (docs/json-schemas.md).";

std::string version_line() {
  const fragscope::BuildInfo info = fragscope::build_info();
  return fmt::format("fragscope {} (revision {})", info.version, info.revision);
}

/// An error quotes its input (a key, a value, a file name): control characters become '?' so it stays one line and
/// moves no terminal cursor, and it is cut at kMaxErrorBytes (a 900 KB value echoed whole is no message).
std::string one_line(std::string_view message) {
  constexpr std::size_t kMaxErrorBytes = 2000;
  std::string line = fragscope::one_line_safe(message.substr(0, kMaxErrorBytes));  // a cut character becomes '?'
  if (message.size() > kMaxErrorBytes) line += "...";
  return line;
}

int fail(const std::string& message, int status) {
  std::fputs(fmt::format("fragscope: error: {}\n", one_line(message)).c_str(), stderr);
  return status;
}

/// CLI11's message with the command it happened in ("analyze: FILE is required"), and where the
/// usage is when the words, not a value, were wrong.
std::string parse_error_line(const CLI::App& app, const CLI::ParseError& error) {
  const std::vector<CLI::App*> parsed = app.get_subcommands();
  const std::string command = parsed.empty() ? std::string() : parsed.front()->get_name();
  const bool bad_value = dynamic_cast<const CLI::ValidationError*>(&error) != nullptr ||
                         dynamic_cast<const CLI::ConversionError*>(&error) != nullptr;
  std::string line = command.empty() ? error.what() : fmt::format("{}: {}", command, error.what());
  if (!bad_value) line += fmt::format("; see 'fragscope {}--help'", command.empty() ? "" : command + " ");
  return line;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fragscope: why a GPU training job ran out of memory or sits idle, from its own data", "fragscope"};
  app.require_subcommand(1);
  app.fallthrough();  // --quiet after a command's own flags
  app.set_version_flag("--version", version_line(), "Print the version and the source revision, and exit");
  fragscope::cli::RunState state;
  app.add_flag("-q,--quiet", state.quiet, "Draw no progress bar (it is drawn only when stderr is a terminal)");
  fragscope::cli::add_analyze_command(app, state);
  fragscope::cli::add_agent_command(app, state);
  fragscope::cli::add_check_command(app, state);
  fragscope::cli::add_doctor_command(app, state);
  fragscope::cli::add_replay_command(app, state);
  fragscope::cli::add_whatif_command(app, state);
  fragscope::cli::add_plan_command(app, state);
  fragscope::cli::add_view_command(app, state);
  fragscope::cli::add_generated_docs_commands(app, state);
  app.footer(fmt::format("{}\n\n{}", fragscope::cli::kSizesHelp, kMoreHelp));  // after the commands: theirs differ
  if (argc <= 1) {
    std::cerr << app.help();
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (const auto unknown = fragscope::cli::explain_unknown_word(app, args)) return fail(*unknown, 2);
    return fail(parse_error_line(app, e), 2);
  } catch (const fragscope::InputError& e) {
    return fail(e.what(), 2);
  } catch (const std::bad_alloc&) {
    return fail("out of memory", 2);
  } catch (const std::exception& e) {
    std::fputs(fmt::format("fragscope: internal error: {}\n", one_line(e.what())).c_str(), stderr);
    return 3;
  }
  return state.exit_code;
}
