#pragma once
/// @file toml_key_depth.h
/// @brief A bound on how deep a TOML file's keys go, checked before toml++ parses it.
///
/// Why: toml++ builds a table per part of a dotted key (`a.b.c = 1`) or table header (`[a.b.c]`)
/// by recursion, without a limit: a 200 KB key of 100,000 parts, well under any file cap,
/// overflows the stack (SIGSEGV). Its arrays and inline tables have their own limit. Every TOML
/// input (a job spec, the agent's config) goes through this first.
/// Thread-safety: a pure function.

#include <cstddef>
#include <string_view>

namespace fragscope {

/// @brief The most parts a key or table header may have: the deepest key of any spec or config here has 3.
inline constexpr std::size_t kMaxTomlKeyParts = 32;

/// @brief Throws InputError "SOURCE: line N: a dotted key or table header of more than 32 parts"
/// for the first chain of more than kMaxTomlKeyParts parts joined by dots: a key before '=', a
/// table header, or a key inside an inline table (`x = {a.b.c = 1}`). Outside comments; a quoted
/// part counts as one; parts side by side without a dot start a new chain (a float is one dot).
void refuse_deep_toml_keys(std::string_view text, std::string_view source);

}  // namespace fragscope
