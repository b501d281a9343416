#include "cli/suggestions.h"

#include <algorithm>
#include <cctype>
#include <numeric>

#include <fmt/format.h>

namespace fragscope::cli {
namespace {

std::string_view without_dashes(std::string_view flag) {
  while (!flag.empty() && flag.front() == '-') flag.remove_prefix(1);
  return flag;
}

/// A word CLI11 would read as a flag: "-x", "--xyz", "--xyz=v"; not "-", "--" or "-5".
bool is_flag_word(std::string_view word) {
  return word.size() > 1 && word.front() == '-' && !std::isdigit(static_cast<unsigned char>(word[1])) &&
         word[1] != '.' && word != "--";
}

std::vector<std::string> flag_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
    for (const std::string& name : option->get_snames()) names.push_back("-" + name);
  }
  return names;
}

/// The commands a person is shown (hidden ones, in the group "", are not offered).
std::vector<std::string> visible_commands(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); }))
    names.push_back(sub->get_name());
  return names;
}

const CLI::App* find_command(const CLI::App& app, const std::string& word) {
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (sub->check_name(word)) return sub;
  return nullptr;
}

std::string quoted_list(const std::vector<std::string>& words, std::string_view last_joint) {
  std::string text;
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (i > 0) text += i + 1 == words.size() ? last_joint : ", ";
    text += fmt::format("'{}'", words[i]);
  }
  return text;
}

std::string unknown_flag(const CLI::App& app, const CLI::App* command, std::string_view flag) {
  const CLI::App& scope = command ? *command : app;
  std::vector<std::string> candidates = flag_names(scope);
  if (command) {
    for (std::string& name : flag_names(app)) candidates.push_back(std::move(name));
  }
  std::vector<std::string> stripped;
  for (const std::string& name : candidates) stripped.emplace_back(without_dashes(name));
  std::vector<std::string> near = closest_words(without_dashes(flag), stripped);
  const std::string where = command ? fmt::format("{}: ", command->get_name()) : std::string();
  if (!near.empty()) {
    for (std::string& name : near) {
      name = candidates[static_cast<std::size_t>(std::find(stripped.begin(), stripped.end(), name) - stripped.begin())];
    }
    return fmt::format("{}unknown flag '{}'; did you mean {}?", where, flag, quoted_list(near, " or "));
  }
  std::vector<std::string> owners;
  for (const std::string& name : visible_commands(app)) {
    if (find_command(app, name)->get_option_no_throw(std::string(flag)) != nullptr) owners.push_back(name);
  }
  if (!owners.empty()) {
    return fmt::format("{}unknown flag '{}' (a flag of {})", where, flag, quoted_list(owners, " and "));
  }
  return fmt::format("{}unknown flag '{}' ('fragscope {}--help' lists the flags)", where, flag,
                     command ? command->get_name() + " " : std::string());
}

}  // namespace

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: Levenshtein plus the swap of two neighbours ("replya").
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitution = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::vector<std::string> closest_words(std::string_view word, const std::vector<std::string>& candidates) {
  std::vector<std::string> near;
  if (word.size() >= 2) {
    for (const std::string& c : candidates)
      if (c.size() > word.size() && c.starts_with(word)) near.push_back(c);
    if (!near.empty()) return near;
  }
  const std::size_t limit = std::max<std::size_t>(1, word.size() / 3);
  std::size_t best = limit + 1;
  for (const std::string& c : candidates) {
    const std::size_t distance = edit_distance(word, c);
    if (distance < best) {
      best = distance;
      near.clear();
    }
    if (distance == best && distance <= limit) near.push_back(c);
  }
  return near;
}

std::optional<std::string> explain_unknown_word(const CLI::App& app, const std::vector<std::string>& args) {
  const CLI::App* command = nullptr;
  for (const std::string& word : args) {
    if (word == "--") break;
    if (is_flag_word(word)) {
      const std::string flag = word.substr(0, word.find('='));
      const bool known = (command && command->get_option_no_throw(flag) != nullptr) ||
                         app.get_option_no_throw(flag) != nullptr;
      if (!known) return unknown_flag(app, command, flag);
    } else if (!command) {
      command = find_command(app, word);
      if (command) continue;
      const std::vector<std::string> commands = visible_commands(app);
      const std::vector<std::string> near = closest_words(word, commands);
      if (!near.empty()) return fmt::format("unknown command '{}'; did you mean {}?", word, quoted_list(near, " or "));
      return fmt::format("unknown command '{}'; the commands are {}", word, fmt::join(commands, ", "));
    }
  }
  return std::nullopt;
}

}  // namespace fragscope::cli
