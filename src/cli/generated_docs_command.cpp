#include <iostream>
#include <memory>
#include <string>

#include "cli/command_model.h"
#include "cli/commands.h"
#include "cli/generated_docs.h"
#include "util/build_info.h"

namespace fragscope::cli {

void add_generated_docs_commands(CLI::App& app, RunState& state) {
  auto shell = std::make_shared<std::string>();
  auto* completion = app.add_subcommand("completion", "Print the completion script of a shell (bash, zsh)");
  completion->group("");  // hidden: for packagers and the build
  completion->add_option("SHELL", *shell, "bash or zsh")
      ->type_name("SHELL")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh"}).description(""));
  completion->callback([&app, shell, &state] {
    const CliModel cli = describe_cli(app);
    if (*shell == "bash") write_bash_completion(cli, std::cout);
    else write_zsh_completion(cli, std::cout);
    state.exit_code = 0;
  });
  auto* man = app.add_subcommand("man", "Print the man page fragscope(1) in troff");
  man->group("");
  man->callback([&app, &state] {
    write_man_page(describe_cli(app), build_info().version, std::cout);
    state.exit_code = 0;
  });
}

}  // namespace fragscope::cli
