#pragma once
/// @file json_input.h
/// @brief JSON parsing for the readers: nlohmann's errors turned into one-line InputErrors.
///
/// Internal to the readers (snapshot and diagnose); not part of their public headers.

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace fragscope::inputs {

/// @brief The deepest nesting a JSON input may have: no memory_stats, criteria or steps.jsonl record nests past 3,
/// and nlohmann's dump() recurses (100,000 nested arrays in a 200 KB line overflowed the stack).
inline constexpr int kMaxJsonDepth = 64;

/// @brief nlohmann::json::parse of `text`, refusing nesting deeper than kMaxJsonDepth as a parse error
/// ("nested deeper than 64").
/// @throws nlohmann::json::parse_error
nlohmann::json parse_json(std::string_view text);

/// @brief Parses one JSON document (no comments, no NaN) that must be an object.
/// @param what names the document in the error ("memory_stats", "acceptance criteria").
/// @throws InputError "SOURCE: invalid JSON: parse error at line L, column C: ..." or
///         "SOURCE: WHAT must be a JSON object, found TYPE".
nlohmann::json parse_json_object(std::string_view text, std::string_view source, std::string_view what);

/// @brief nlohmann's message without its "[json.exception.x.y] " tag and with no line breaks.
std::string json_error_text(const nlohmann::json::exception& error);

}  // namespace fragscope::inputs
