#pragma once
/// @file json_input.h
/// @brief JSON parsing for the readers: nlohmann's errors turned into one-line InputErrors.
///
/// Internal to the readers (snapshot and diagnose); not part of their public headers.

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace fragscope::inputs {

/// @brief Parses one JSON document (no comments, no NaN) that must be an object.
/// @param what names the document in the error ("memory_stats", "acceptance criteria").
/// @throws InputError "SOURCE: invalid JSON: parse error at line L, column C: ..." or
///         "SOURCE: WHAT must be a JSON object, found TYPE".
nlohmann::json parse_json_object(std::string_view text, std::string_view source, std::string_view what);

/// @brief nlohmann's message without its "[json.exception.x.y] " tag and with no line breaks.
std::string json_error_text(const nlohmann::json::exception& error);

}  // namespace fragscope::inputs
