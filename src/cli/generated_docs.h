#pragma once
/// @file generated_docs.h
/// @brief What the CLI's definitions generate (command_model.h): the bash and zsh completion
/// scripts and the man page. The build writes them with `fragscope completion bash|zsh` and
/// `fragscope man`, and `cmake --install` puts them where the shells and man look.

#include <ostream>

#include "cli/command_model.h"

namespace fragscope::cli {

/// @brief A bash script defining _fragscope and `complete -F _fragscope fragscope`: commands,
/// their flags, files for paths, the words of GPU / CONF / SHELL values.
void write_bash_completion(const CliModel& cli, std::ostream& out);

/// @brief A zsh completion function (#compdef fragscope) with every flag's description.
void write_zsh_completion(const CliModel& cli, std::ostream& out);

/// @brief fragscope(1) in man(7) macros: synopsis, each command with its arguments and flags,
/// sizes, exit status.
void write_man_page(const CliModel& cli, std::string_view version, std::ostream& out);

}  // namespace fragscope::cli
