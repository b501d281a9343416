#include "cli/command_model.h"

#include "util/gpu_catalog.h"

namespace fragscope::cli {
namespace {

CommandModel describe_command(const CLI::App& app) {
  CommandModel command;
  command.name = app.get_parent() ? app.get_name() : std::string();
  command.description = app.get_description();
  command.footer = app.get_footer();
  for (const CLI::Option* option : app.get_options()) {
    const bool repeatable = option->get_expected_max() > 1 || option->get_multi_option_policy() ==
                                                                  CLI::MultiOptionPolicy::TakeAll;
    if (option->nonpositional()) {
      FlagModel flag;
      for (const std::string& name : option->get_snames()) flag.names.push_back("-" + name);
      for (const std::string& name : option->get_lnames()) flag.names.push_back("--" + name);
      flag.description = option->get_description();
      flag.takes_value = option->get_type_size_max() > 0;
      if (flag.takes_value) flag.value_name = option->get_type_name();
      flag.repeatable = repeatable;
      command.flags.push_back(std::move(flag));
    } else {
      command.positionals.push_back({option->get_name(true), option->get_type_name(), option->get_description(),
                                     option->get_required(), repeatable});
    }
  }
  return command;
}

}  // namespace

CliModel describe_cli(const CLI::App& app) {
  CliModel model;
  model.program = describe_command(app);
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    model.commands.push_back(describe_command(*sub));
    model.commands.back().hidden = sub->get_group().empty();
  }
  return model;
}

std::vector<std::string> value_words(const std::string& value_name) {
  if (value_name == "GPU") {
    std::vector<std::string> names;
    for (std::string_view name : gpu_names()) names.emplace_back(name);
    return names;
  }
  if (value_name == "CONF") {
    return {"default", "expandable_segments:True", "max_split_size_mb:", "roundup_power2_divisions:",
            "garbage_collection_threshold:", "max_non_split_rounding_mb:", "large_segment_size_mb:"};
  }
  if (value_name == "SHELL") return {"bash", "zsh"};
  return {};
}

bool is_path_value(const std::string& value_name) {
  return value_name == "FILE" || value_name == "DIR" || value_name == "PATH";
}

}  // namespace fragscope::cli
