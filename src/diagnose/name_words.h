#pragma once
/// @file name_words.h
/// @brief Whether a name (a function, a file, a `record_function` annotation) has a word that begins
/// with one of some stems, in any case. Words begin at the name's start, after any character that is
/// not a letter, at a change from a lower-case to an upper-case letter, and at the last capital of a
/// run of them followed by a lower-case letter: "_EvaluationLoop", "run_eval", "isValid", "step2eval",
/// "HFEval". A stem inside a word is no match: "_mask_invalid_locations" (Longformer's training
/// forward) does not name validation, "retrieval" and "interval" no evaluation.
/// Thread-safety: a pure function.

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <initializer_list>
#include <string_view>

namespace fragscope::diagnose {

/// REQUIRES: the stems are lower case.
inline bool has_word_beginning_with(std::string_view name, std::initializer_list<std::string_view> stems) {
  for (std::size_t i = 0; i < name.size(); ++i) {
    const int c = static_cast<unsigned char>(name[i]);
    if (!std::isalpha(c)) continue;
    const int before = i > 0 ? static_cast<unsigned char>(name[i - 1]) : '_';
    const int after = i + 1 < name.size() ? static_cast<unsigned char>(name[i + 1]) : '_';
    const bool begins = !std::isalpha(before) || (std::islower(before) && std::isupper(c)) ||
                        (std::isupper(before) && std::isupper(c) && std::islower(after));
    if (!begins) continue;
    for (const std::string_view stem : stems) {
      if (name.size() - i < stem.size()) continue;
      if (std::equal(stem.begin(), stem.end(), name.begin() + static_cast<std::ptrdiff_t>(i),
                     [](char s, char n) { return s == std::tolower(static_cast<unsigned char>(n)); }))
        return true;
    }
  }
  return false;
}

}  // namespace fragscope::diagnose
