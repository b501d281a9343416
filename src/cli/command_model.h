#pragma once
/// @file command_model.h
/// @brief The CLI's definitions (CLI11's App) as plain data, for what is generated from them:
/// shell completions and the man page (generated_docs.h), so that those never drift from the
/// flags the binary accepts.
///
/// A value's kind comes from the option's type name: FILE (a file), DIR (a folder), PATH
/// (either), GPU (a name from the GPU catalogue), CONF (a PYTORCH_CUDA_ALLOC_CONF), SHELL;
/// any other is a free value (a number, a size) with nothing to offer. Commands in the group ""
/// (`completion`, `man`) are hidden: not offered, not in the man page.

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace fragscope::cli {

struct FlagModel {
  std::vector<std::string> names;  ///< "--json", "-q", in definition order
  std::string description;
  bool takes_value = false;
  std::string value_name;          ///< the type name ("FILE", "SIZE", "N"); "" for a flag
  bool repeatable = false;         ///< may be given several times (a list)
};

struct PositionalModel {
  std::string name;        ///< "SNAPSHOT"
  std::string value_name;  ///< "FILE", "PATH", "SHELL"
  std::string description;
  bool required = false;
  bool repeatable = false;
};

struct CommandModel {
  std::string name;  ///< "" for the program itself
  bool hidden = false;  ///< in the group "": not listed, but its arguments still complete
  std::string description;
  std::string footer;
  std::vector<FlagModel> flags;
  std::vector<PositionalModel> positionals;
};

struct CliModel {
  CommandModel program;               ///< the app: its own flags (--help, --version, --quiet)
  std::vector<CommandModel> commands; ///< every command, in definition order
};

/// @brief Reads `app`'s definitions.
CliModel describe_cli(const CLI::App& app);

/// @brief Words to offer for a value of `value_name` (GPU names, config keys, shells); empty
/// when the value is a path or free.
std::vector<std::string> value_words(const std::string& value_name);

/// @brief The value is a file or folder path (FILE, DIR, PATH).
bool is_path_value(const std::string& value_name);

}  // namespace fragscope::cli
