#pragma once
/// @file text_file.h
/// @brief Reads a whole (small) input file for the text readers, with one-line errors.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace fragscope::inputs {

/// @brief Largest file the text readers load whole; bigger inputs are refused, not truncated.
inline constexpr std::uintmax_t kMaxTextFileBytes = std::uintmax_t{1} << 30;

/// @brief The bytes of `path`.
/// @throws InputError "PATH: cannot read (reason)" when it is missing, a directory, unreadable
/// or larger than kMaxTextFileBytes.
std::string read_text_file(const std::filesystem::path& path);

/// @brief `text` made safe to quote in a one-line error: bytes outside printable ASCII become
/// '?', and text longer than `max_chars` is cut with "...".
std::string printable_excerpt(std::string_view text, std::size_t max_chars = 60);

}  // namespace fragscope::inputs
