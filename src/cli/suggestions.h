#pragma once
/// @file suggestions.h
/// @brief "did you mean": finds the word of a command line the CLI does not know (a command, or a
/// flag of the command) and the known words closest to it.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace fragscope::cli {

/// @brief Edits (insert, delete, substitute, swap two neighbours) that turn `a` into `b`.
std::size_t edit_distance(std::string_view a, std::string_view b);

/// @brief The candidates a person most likely meant by `word`: those it is a prefix of, else
/// those within a third of its length in edits (at least one), the closest first. Empty when
/// none is near.
std::vector<std::string> closest_words(std::string_view word, const std::vector<std::string>& candidates);

/// @brief The first word of `args` (argv without the program) that `app` does not know: an
/// unknown command, or a flag that neither the command nor the app has. @return one line saying
/// which and what was meant ("unknown command 'doctr'; did you mean 'doctor'?"), or nullopt when
/// every word is known.
std::optional<std::string> explain_unknown_word(const CLI::App& app, const std::vector<std::string>& args);

}  // namespace fragscope::cli
